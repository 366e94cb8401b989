"""The backend interface (ccbench_kit.backends.base): a backend written
against it alone plugs in with one registration line.

`tests/example_backends/loopback.py` is that backend: each rank computes the
collective with numpy from every rank's inputs.  Its results are checked by
the harness against golden results computed by other code (the collectives'
own `golden`), on 3 ranks and sizes that don't divide evenly."""
import json
import pathlib
import re
import textwrap

import pytest

from conftest import mpirun_python
from ccbench_kit import backends
from ccbench_kit.errors import ConfigError

TESTS = pathlib.Path(__file__).resolve().parent

CODE = textwrap.dedent("""
    import io, json, sys, contextlib
    sys.path.insert(0, {tests!r})
    from mpi4py import MPI
    import ccbench_kit
    from ccbench_kit import backends
    backends.register("loopback", "example_backends.loopback:LoopbackBackend")  # the one line
    rank = MPI.COMM_WORLD.Get_rank()
    out = {{}}
    for coll in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "alltoall"):
        ds = ccbench_kit.run(coll, sizes=[12, 1000, 4 * 3333 + 4], backend="loopback",
                             check="random", seed=5, dtype="int32", op="max", root=2,
                             warmup=1, iters=3)
        if rank == 0:
            out[coll] = {{"wrong": ds["wrong"].values.tolist(), "counts": ds["count"].values.tolist(),
                         "algorithms": ds["algorithm"].values.tolist(),
                         "latency_ok": bool((ds["latency"] > 0).all()),
                         "devices": ds["device"].values.tolist(),
                         "attrs": {{k: ds.attrs[k] for k in ("backend", "library", "timing")}}}}
    # the CLI: the backend's own flag reaches its options on every rank
    from ccbench_kit.cli import main
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(["run", "all_gather", "--backend", "loopback", "--loopback-delay-us", "3000",
                   "-b", "12", "-e", "12", "-n", "3", "-w", "0", "--non-interactive",
                   "--check", "--out", {out!r}])
    if rank == 0:
        import xarray as xr
        ds = xr.open_dataset({out!r})
        out["cli"] = {{"rc": rc, "table": buf.getvalue(),
                      "min_latency": float(ds["latency"].min()),
                      "options": json.loads(ds.attrs["config"])["backend_options"]}}
        print("@@" + json.dumps(out))
""")


def test_a_backend_written_against_the_interface_runs_a_sweep(tmp_path):
    code = CODE.format(tests=str(TESTS), out=str(tmp_path / "lb.nc"))
    p = mpirun_python(3, code, timeout=300)
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("@@")), None)
    assert p.returncode == 0 and line, p.stdout[-3000:] + p.stderr[-3000:]
    res = json.loads(line[2:])
    # elements per rank's call for 12, 1000 and 13336 bytes of int32 on 3 ranks
    counts = {"all_reduce": [3, 250, 3334], "broadcast": [3, 250, 3334],
              "all_gather": [1, 83, 1111], "reduce_scatter": [1, 83, 1111],
              "alltoall": [1, 83, 1111]}
    for coll, r in res.items():
        if coll == "cli":
            continue
        assert r["counts"] == counts[coll], coll
        assert r["algorithms"] == ["numpy"], coll
        # checked, out of place and in place, every size: nothing wrong
        assert r["wrong"] == [[[0, 0, 0], [0, 0, 0]]], coll
        assert r["latency_ok"] and r["devices"] == ["numpy"] * 3, coll
        assert r["attrs"]["backend"] == "loopback" and r["attrs"]["timing"] == "host-clock"
        assert r["attrs"]["library"].endswith("(loopback)")
    cli = res["cli"]
    assert cli["rc"] == 0 and cli["options"] == {"delay_us": 3000.0}
    assert cli["min_latency"] >= 3000  # µs: the flag's delay reached every call
    rows = [ln.split() for ln in cli["table"].splitlines() if ln.split()[:1] == ["12"]]
    assert [r[:6] for r in rows] == [["12", "1", "fp32", "none", "-1", "numpy"]], cli["table"]


def test_the_registry_finds_backends_by_name_only():
    assert backends.names()[:2] == ["mpi", "nccl"]
    assert backends.backend_class("nccl").warms_every_size
    assert not backends.backend_class("mpi").warms_every_size
    assert backends.backend_class("mpi").default_algorithm == "mpi"
    with pytest.raises(ConfigError, match=r"--backend: unknown backend 'gloo'; choose one of "
                                          r"mpi, nccl"):
        backends.backend_class("gloo")
    backends.register("not-a-backend", "json:dumps")
    try:
        with pytest.raises(ConfigError, match="not a subclass of ccbench_kit.backends.base.Backend"):
            backends.backend_class("not-a-backend")
    finally:
        backends._REGISTRY.pop("not-a-backend")


def test_a_backend_option_another_backend_owns_is_refused():
    from ccbench_kit.api import make_config
    with pytest.raises(ConfigError, match=r"--backend: the mpi backend has no option 'mem_type'"):
        make_config("all_reduce", 2, sizes=[8], backend_options={"mem_type": "ncclMemAlloc"})
    with pytest.raises(ConfigError, match=r"--timing: timing 'batch' needs --backend nccl"):
        make_config("all_reduce", 2, sizes=[8], timing="batch")


def test_the_harness_asks_the_interface_not_the_object():
    src = (TESTS.parent / "ccbench_kit" / "harness.py").read_text()
    assert not re.findall(r"hasattr\(|getattr\(self\.backend|getattr\(be\b", src)
    init = (TESTS.parent / "ccbench_kit" / "backends" / "__init__.py").read_text()
    assert not re.findall(r"""==\s*["'](mpi|nccl)["']""", init)  # no branching on names


def test_backends_own_their_facts():
    # what the kit used to decide by `backend == "mpi"` in hostinfo,
    # preflight and the theory presets: asked of the Backend class
    import numpy as np
    import xarray as xr

    from ccbench_kit.backends.mpi import MPIBackend
    from ccbench_kit.backends.nccl import NCCLBackend
    assert (MPIBackend.host_buffers, NCCLBackend.host_buffers) == (True, False)
    assert backends.Backend.host_buffers is False  # a new backend opts in
    h100 = xr.Dataset(coords={"device": ("rank", np.array(["NVIDIA H100 80GB HBM3"] * 2))},
                      attrs={"backend": "nccl", "hosts": json.dumps(["a", "a"])})
    assert backends.default_preset(h100) == "h100-nvlink4"
    assert backends.default_preset(h100.assign_attrs(hosts=json.dumps(["a", "b"]))) is None
    assert backends.default_preset(xr.Dataset(attrs={"backend": "mpi"})) == "cpu"
    assert backends.default_preset(xr.Dataset(attrs={"backend": ""})) is None  # an import
    # the timings whose iteration slots hold one average: nccl's batch and graph
    assert (NCCLBackend.aggregated_timings, MPIBackend.aggregated_timings) == (("batch", "graph"), ())
    assert set(backends.aggregated_timings()) == {"batch", "graph"}
