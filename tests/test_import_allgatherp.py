"""The AllgatherP bench: in-place and out-of-place runs in one log, no
Ranks line, broken rows."""
from pathlib import Path

import pytest

from ccbench_kit import importers
from ccbench_kit.importers import ImporterError

DATA = Path(__file__).parent / "data" / "baselines"
SAMPLE = (DATA / "allgatherp_8ranks.txt").read_text()


def _row(alg, size, avg, ranks=8):
    """A row as the bench prints it (setw(25) name, setw(12) numbers, 3 decimals)."""
    alg_bw = size * ranks / (avg / 1e3) / 1e9
    return (f"{alg:<25}{size:>12}{size // 2:>12}{avg:>12.3f}{avg * 0.9:>12.3f}{avg * 1.1:>12.3f}"
            f"{alg_bw:>12.3f}{alg_bw * (ranks - 1) / ranks:>12.3f}")


def test_in_and_out_of_place_runs_merge():
    inplace = SAMPLE.replace("In-Place: No", "In-Place: Yes").replace("...", "")
    extra = "\n".join(_row(a, 65536, t) for a, t in (("AllGatherP_Direct", 0.2),
                                                     ("AllGatherP_Pipeline", 0.18),
                                                     ("NCCL_AllGather", 0.19)))
    text = SAMPLE.replace("...", extra) + "\n[       OK ] AllgatherPBench.run (120 ms)\n" \
        + inplace.replace("...", "") + extra
    (ds,) = importers.read_text(text, "agp.txt")
    assert list(ds["placement"].values) == ["out_of_place", "in_place"]
    assert list(ds["size"].values) == [262144, 524288]                # x 8 ranks
    # 65536 B x 8 / 200 us = 2.62144 GB/s algbw; x 7/8 = 2.29376
    assert float(ds.ccb.busbw().sel(size=524288, placement="in_place", algorithm="AllGatherP_Direct")) \
        == pytest.approx(2.29376)


def test_ranks_from_algobw_when_the_config_is_missing():
    text = SAMPLE[SAMPLE.index("Algorithm "):]
    (ds,) = importers.read_text(text, "agp.txt")
    # AlgoBW 2.346 x 112 us / 32768 B = 8.02 -> 8 ranks
    assert ds.attrs["nranks"] == 8 and int(ds["size"].values[0]) == 262144


def test_broken_rows():
    cut = SAMPLE.replace("...", "NCCL_AllGather                 65536       32768       0.2")
    with pytest.raises(ImporterError, match=r"a.txt:19: expected 8 columns .*truncated"):
        importers.read_text(cut, "a.txt")
    (ds,) = importers.read_text(cut, "a.txt", partial=True)
    assert ds.sizes["size"] == 1
    bad = SAMPLE.replace("0.112       0.108", "0.1x2       0.108")
    with pytest.raises(ImporterError, match=r"b.txt:17: expected a number in the avg column"):
        importers.read_text(bad, "b.txt")
    nohdr = SAMPLE.replace("AlgoBW(GB/s)", "Algo(GB/s)")
    with pytest.raises(ImporterError, match=r"h.txt:14: expected the AllgatherP header"):
        importers.read_text(nohdr, "h.txt")
