"""The NVLink pair matrix on real GPUs (``ccbench doctor --local``, 2 GPUs
or more): the peer copies move the bytes, their figures lie in their
physical range, every ordered pair is measured, and the CLI prints the
pair table.  Skipped with fewer than 2 GPUs; bench/gpu_pairs.sh runs them
on the device machine."""
import ctypes
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import gpus_here

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


_N = gpus_here()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(
    not isinstance(_N, int) or _N < 2,
    reason=f"needs 2+ GPUs ({_N if not isinstance(_N, int) else f'{_N} GPU(s)'})")]


def copied(rt, copies, want, copy):
    """`want` put in gpu0's source buffer, `copy()` run (gpu0 -> gpu1):
    (what gpu1's destination buffer then holds, copy's return)."""
    from ccbench_kit.health.gpu.cuda import D2H, H2D
    got = np.zeros_like(want)
    rt.check(rt.rt.cudaMemcpy(copies.src[0], want.ctypes.data_as(ctypes.c_void_p),
                              ctypes.c_size_t(want.nbytes), H2D), "cudaMemcpy")
    out = copy()
    rt.check(rt.rt.cudaMemcpy(got.ctypes.data_as(ctypes.c_void_p), copies.dst[1],
                              ctypes.c_size_t(got.nbytes), D2H), "cudaMemcpy")
    return got, out


def test_peer_copy_moves_the_bytes_and_its_figures_are_physical():
    from ccbench_kit.health.gpu.cuda import Runtime
    from ccbench_kit.health.gpu.peer import PeerCopies
    rt = Runtime()
    copies = PeerCopies(rt, [0, 1], nbytes=64 << 20)
    try:
        if not (copies.access[(0, 1)] and copies.access[(1, 0)]):
            pytest.skip("GPUs 0 and 1 have no peer access")
        want = np.arange((64 << 20) // 4, dtype=np.uint32)
        got, gbps = copied(rt, copies, want, lambda: copies.one_way_gbps(0, 1, reps=1))
        assert np.array_equal(got, want)  # gpu0's bytes are in gpu1's buffer
        assert 5 < gbps < 1000  # PCIe Gen4 x16 at the least, below NVLink5 per direction
        both = copies.both_ways_gbps(0, 1)
        assert 5 < both < 2000
        lat = copies.latency_us(0, 1)
        assert 0.3 < lat < 200
    finally:
        copies.close()


def test_sm_copy_moves_the_bytes_and_its_figures_are_physical():
    """The SM kernels (NVRTC, loaded with cudaLibraryLoadData): gpu0's SMs
    write gpu0's bytes into gpu1's buffer; the rate and the pointer chase's
    load latency lie in their physical range."""
    from ccbench_kit.health.gpu.cuda import Runtime
    from ccbench_kit.health.gpu.peer import PeerCopies
    from ccbench_kit.health.gpu.sm_copy import SmCopies
    rt = Runtime()
    copies = PeerCopies(rt, [0, 1], nbytes=(64 << 20) + 48)  # not a whole number of blocks
    sm = None
    try:
        if not (copies.access[(0, 1)] and copies.access[(1, 0)]):
            pytest.skip("GPUs 0 and 1 have no peer access")
        sm = SmCopies(copies)
        want = np.random.default_rng(3).integers(0, 2**32, copies.nbytes // 4, dtype=np.uint32)
        got, gbps = copied(rt, copies, want, lambda: sm.one_way_gbps(0, 1, reps=1))
        assert np.array_equal(got, want)
        assert 5 < gbps < 1000
        lat = sm.latency_us(0, 1)
        assert 0.2 < lat < 50, lat
        local = sm.latency_us(1, 1)  # the same ring from its own GPU: no link in the way
        assert local < lat, (local, lat)
    finally:
        if sm is not None:
            sm.close()
        copies.close()


def test_doctor_local_measures_every_ordered_pair(tmp_path):
    out = tmp_path / "gpu.nc"
    p = subprocess.run([sys.executable, "-m", "ccbench_kit", "doctor", "--local", "--repeats",
                        "3", "--out", str(out)], capture_output=True, text=True, cwd=tmp_path,
                       timeout=300, env={**os.environ, "PYTHONPATH": os.pathsep.join(
                           [ROOT, *filter(None, [os.environ.get("PYTHONPATH")])])})
    assert p.returncode in (0, 1), p.stderr[-3000:]
    from ccbench_kit.health.gpu import check
    ds = check.load(str(out))
    assert ds.sizes["link"] == _N * (_N - 1) and ds.sizes["pair"] == _N * (_N - 1) // 2
    no_access = json.loads(ds.attrs["peer_no_access"])
    measured = [str(x) for x in ds["pair"].values if str(x) not in no_access]
    assert np.isfinite(ds["peer_bidir_gbps"].sel(pair=measured).values).all()
    # NVRTC is on the device machines (nvidia-cuda-nvrtc): the SM figures are measured
    assert ds.attrs["peer_sm_missing"] == ""
    links = [f"{a}->{b}" for a in range(_N) for b in range(_N) if a != b
             and f"{min(a, b)}<->{max(a, b)}" not in no_access]
    for figure in ("peer_sm_gbps", "peer_sm_latency_us"):
        assert np.isfinite(ds[figure].sel(link=links).values).all(), figure
    assert float(ds.attrs["pair_matrix_s"]) > 0
    lines = p.stdout.splitlines()
    assert sum("peer copy" in ln for ln in lines) == _N * (_N - 1)
    assert sum("SM copy" in ln for ln in lines) == _N * (_N - 1)
    assert sum("NVLink errors during the matrix" in ln for ln in lines) == _N
    assert lines[-1].startswith("verdict: ")
