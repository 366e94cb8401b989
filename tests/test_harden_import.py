"""NCCL Inspector input (issue 28): a single dump file's format is told
from a bounded peek and the file is then streamed, never read whole; a
record whose ``coll`` is not a string is one clear line, not a TypeError."""
import json
import sys
import tracemalloc
from pathlib import Path

import pytest

from ccbench_kit import importers
from ccbench_kit.importers import ImporterError

DATA = Path(__file__).parent / "data" / "inspector"
sys.path.insert(0, str(DATA))
import make_samples as sample  # noqa: E402

sys.path.remove(str(DATA))

COMM = {"id": "0xabc", "name": "w", "n": 2, "nnodes": 1}
# a long git_rev makes each record ~4 KB, so that the records' columns are a
# small part of the file and a whole read (bytes, then text: twice the
# file) stands out from the streamed one
PAD = "g" * 4000


def _big_dump(path, mb):
    with open(path, "w") as f:
        written, sn = 0, 0
        while written < mb << 20:
            sn += 1
            for rank in (0, 1):
                line = sample.record(COMM, rank, "h", 1 + rank, 0, "coll_perf",
                                     sample.coll("AllReduce", sn, 8192, 5 + rank, 2))
                line = line.replace('"git_rev":""', f'"git_rev":"{PAD}"')
                written += f.write(line)
    return path, sn


def _peak(fn):
    tracemalloc.start()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    importers.open_any(DATA)    # modules an import loads on first use are not the file's memory
    return _big_dump(tmp_path_factory.mktemp("insp") / "node-pid1.log", 24)


def test_format_of_a_large_dump_is_told_from_its_head(big):
    path, _ = big
    name, peak = _peak(lambda: importers.detect(path))
    assert name == "NCCL Inspector JSON"
    assert peak < 8 << 20, peak         # the first MiB (bytes and text), not 24 MB


@pytest.mark.parametrize("how", ["open_any", "read_all"])
def test_a_single_large_dump_is_streamed(big, how):
    path, calls = big
    load = {"open_any": lambda: importers.open_any(path),
            "read_all": lambda: importers.read_all([path])}[how]
    parts, peak = _peak(load)
    (ds,) = parts.values() if isinstance(parts, dict) else parts
    assert ds.sizes["iteration"] == calls and ds["latency"].values.ravel()[:2].tolist() == [5, 5]
    size = path.stat().st_size
    assert peak < size // 2, (peak, size)   # a whole read would hold the file twice


@pytest.mark.parametrize("coll", [["AllReduce"], {"a": 1}, 7, None, True, 1.5])
def test_a_coll_that_is_not_a_string_is_one_line(tmp_path, coll):
    perf = sample.coll("AllReduce", 1, 8192, 5, 2).replace('"AllReduce"', json.dumps(coll))
    path = tmp_path / "h-pid1.log"
    path.write_text(sample.record(COMM, 0, "h", 1, 0, "coll_perf", perf))
    with pytest.raises(ImporterError) as e:
        importers.open_any(path)
    msg = str(e.value)
    assert "h-pid1.log:1" in msg and "an Inspector collective" in msg and "\n" not in msg


def test_cli_import_of_a_non_string_coll_exits_2(tmp_path, capsys):
    from ccbench_kit.cli import main
    perf = sample.coll("AllReduce", 1, 8192, 5, 2).replace('"AllReduce"', '["x"]')
    path = tmp_path / "h-pid1.log"
    path.write_text(sample.record(COMM, 0, "h", 1, 0, "coll_perf", perf))
    rc = main(["import", str(path), "-o", str(tmp_path / "o.nc")])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "h-pid1.log:1" in err and not (tmp_path / "o.nc").exists()
