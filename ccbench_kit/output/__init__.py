"""Results as other tools write them, so that their readers read ours.

- ``nccom-test``: ``--report-to-json-file``'s ``{"results": [{"size(B)": ...,
  "time:avg(us)": ...}]}`` (``ccbench_kit.formats.nccom.write_json``).
- ``nccl-tests``: nccl-tests' ``-J`` JSON, format version 3, with the
  per-iteration blocks of ``-I 1`` (``ccbench_kit.formats.nccl_tests.write_json``).

Both are written from a results Dataset, one file per collective; the
writers live with their tool's readers in ``ccbench_kit.formats``.
"""
import json
import math
import os
from collections.abc import Mapping

from .._files import atomic_write_text
from ..formats.nccl_tests.write_json import nccl_tests_json
from ..formats.nccom.write_json import nccom_test_json
from ..errors import ConfigError

FORMATS = {"nccom-test": nccom_test_json, "nccl-tests": nccl_tests_json}

__all__ = ["FORMATS", "json_paths", "nccl_tests_json", "nccom_test_json", "write_json"]


def json_paths(path, names):
    """One path per collective: `path` itself for one, ``STEM.NAME.json`` for several."""
    if len(names) == 1:
        return {names[0]: os.fspath(path)}
    stem, ext = os.path.splitext(os.fspath(path))
    return {n: f"{stem}.{n}{ext or '.json'}" for n in names}


def write_json(results, path, fmt="nccom-test", **options):
    """Write `results` ({collective: Dataset} or one Dataset) as `fmt` JSON.

    Returns the paths written.  `options` go to the format's function
    (``stats``, ``show_algorithm``, ``show_io`` for nccom-test).
    """

    if fmt not in FORMATS:
        raise ConfigError(f"unknown JSON format {fmt!r}; use {' or '.join(FORMATS)}",
                          "--json-format")
    if not isinstance(results, Mapping) or hasattr(results, "data_vars"):  # one Dataset
        results = {results.attrs.get("collective", "results"): results}
    paths = json_paths(path, list(results))
    make = FORMATS[fmt]
    for name, ds in results.items():
        doc = make(ds, **{k: v for k, v in options.items()
                          if k in make.__code__.co_varnames})
        atomic_write_text(paths[name], json.dumps(_nan_as_string(doc), indent=1,
                                                  allow_nan=False) + "\n")
    return list(paths.values())


def _nan_as_string(value):
    # nccl-tests writes NaN as the string "nan" (its jsonDouble), keeping the JSON valid
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: _nan_as_string(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nan_as_string(v) for v in value]
    return value
