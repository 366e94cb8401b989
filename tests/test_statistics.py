"""The kit's one statistics module (dataset/stats.py): a statistic by name
on plain arrays, and the one seeded bootstrap every interval comes from."""
import pathlib
import re

import numpy as np
import pytest

from ccbench_kit.dataset import stats
from ccbench_kit.errors import ConfigError

PKG = pathlib.Path(stats.__file__).resolve().parent.parent


def test_a_statistic_by_name_on_values():
    x = np.array([[1.0, 2.0, 3.0, 10.0], [4.0, np.nan, 6.0, 8.0]])
    assert stats.of_values(x[0], "avg") == 4.0
    assert stats.of_values(x[0], "median") == 2.5
    assert stats.of_values(x[0], "p100") == 10.0 and stats.of_values(x[0], "min") == 1.0
    assert stats.of_values(x, "max", axis=1, skip_nan=True).tolist() == [10.0, 8.0]
    assert stats.of_values(x, "mean", axis=1, skip_nan=True).tolist() == [4.0, 6.0]
    assert np.isnan(stats.of_values(np.array([np.nan]), "p50", skip_nan=True))
    with pytest.raises(ConfigError, match="unknown statistic 'p200'"):
        stats.of_values(x[0], "p200")


def test_the_bootstrap_resamples_with_replacement_and_is_seeded():
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    b = stats.bootstrap(x, "mean", np.random.default_rng(stats.SEED))
    assert b.shape == (stats.N_BOOT,)
    # by hand: the same draws from the same seed
    idx = np.random.default_rng(stats.SEED).integers(0, 5, size=(stats.N_BOOT, 5))
    assert np.array_equal(b, x[idx].mean(axis=1))
    lo, hi = stats.interval(b, 0.90)
    assert (lo, hi) == (np.percentile(b, 5), np.percentile(b, 95)) and 1 <= lo < 3 < hi <= 5


def test_one_resample_count_for_the_whole_kit():
    # no module keeps a count of its own (it was 1000 in the report and
    # --until-stable, 2000 in compare and the doctor)
    own = [f"{p.relative_to(PKG)}: {m.group(0)}" for p in sorted(PKG.rglob("*.py"))
           for m in re.finditer(r"^\s*\w*BOOT\w* = \d+", p.read_text(), re.M)
           if p.name != "stats.py"]
    assert own == []
