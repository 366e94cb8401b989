"""Parameters are data, never code; results files are written atomically."""
import html
import os

import numpy as np
import pytest

from conftest import run_cli
from ccbench_kit.dataset import io, make_dataset


def tiny_dataset():
    lat = np.full((1, 1, 2, 2, 3), 10.0)
    return make_dataset(algorithms=["ring"], placements=["out_of_place"], sizes=[64, 128],
                        counts=[16, 32], in_bytes=[64, 128], out_bytes=[64, 128], latency=lat,
                        wrong=np.zeros((1, 1, 2), int), ranks=[0, 1], hosts=["a", "a"],
                        devices=["cpu", "cpu"],
                        attrs={"collective": "all_reduce", "nranks": 2, "dtype": "fp32"})


def test_report_title_cannot_run_code(tmp_path):
    results = tmp_path / "r.nc"
    io.save(tiny_dataset(), results)
    marker = tmp_path / "pwned"
    title = f"x\"); open(r'{marker}', 'w'); ('\n__import__('os').system('touch {marker}')"
    proc = run_cli("report", results, "-o", tmp_path / "r.html", "--title", title, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert not marker.exists()
    page = (tmp_path / "r.html").read_text()
    assert html.escape("open(r'", quote=False) in page or "open(r&#x27;" in page


def test_save_never_leaves_a_half_written_file(tmp_path, monkeypatch):
    path = tmp_path / "r.nc"
    io.save(tiny_dataset(), path)
    before = path.read_bytes()
    broken = tiny_dataset()
    broken.attrs["bad"] = object()  # netCDF can't store it: the write fails midway
    with pytest.raises(Exception):
        io.save(broken, path)
    assert path.read_bytes() == before
    assert [f for f in os.listdir(tmp_path) if f != "r.nc"] == []


def test_atomic_write_text_replaces_whole_files(tmp_path):
    from ccbench_kit._files import atomic_write_text
    path = tmp_path / "sub" / "x.json"
    atomic_write_text(path, "one\n")
    atomic_write_text(path, "two\n")
    assert path.read_text() == "two\n"
    assert oct(path.stat().st_mode & 0o777) == oct(0o666 & ~_umask())
    assert sorted(p.name for p in path.parent.iterdir()) == ["x.json"]


def _umask():
    m = os.umask(0)
    os.umask(m)
    return m
