"""A backend that asks for it (nccl: `warms_every_size`) gets nccl-tests'
warm-up: every size and algorithm, out of place, before any size is timed.
Run here with the MPI engine standing in for the GPU backend (the harness
path is the same; the nccl backend runs it in tests/test_nccl_gpu.py)."""
import json
import textwrap

from conftest import mpirun_python

CODE = textwrap.dedent("""
    import json
    from mpi4py import MPI
    import ccbench_kit
    from ccbench_kit.backends.mpi import MPIBackend
    MPIBackend.warms_every_size = True
    calls, orig = [], MPIBackend.time
    def spy(self, coll, alg, buffers, **k):
        calls.append((alg, k["count"], k["warmup"], k["iters"]))
        return orig(self, coll, alg, buffers, **k)
    MPIBackend.time = spy
    out = {}
    for coll in ("all_reduce", "alltoallv", "broadcast"):
        calls.clear()
        ds = ccbench_kit.run(coll, sizes=[12, 1000, 4 * 3333 + 4], check="random", seed=1,
                             algorithms="all", warmup=2, iters=3)
        if MPI.COMM_WORLD.rank == 0:
            out[coll] = {"calls": calls[:], "wrong": int(ds["wrong"].max()),
                         "algorithms": ds["algorithm"].values.tolist(),
                         "counts": ds["count"].values.tolist()}
    if MPI.COMM_WORLD.rank == 0:
        print("@@" + json.dumps(out))
""")


def test_every_size_is_warmed_before_any_is_timed():
    p = mpirun_python(3, CODE, timeout=240)
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("@@")), None)
    assert p.returncode == 0 and line, p.stdout[-2000:] + p.stderr[-2000:]
    for coll, r in json.loads(line[2:]).items():
        assert r["wrong"] == 0, coll
        algs, nsizes = r["algorithms"], len(r["counts"])
        warm, timed = r["calls"][:len(algs) * nsizes], r["calls"][len(algs) * nsizes:]
        # size by size, every algorithm, -w warm-up iterations and one more
        assert [(a, w, i) for a, _, w, i in warm] == [(a, 2, 1) for a in algs] * nsizes, coll
        counts = [c for _, c, *_ in warm[::len(algs)]]
        assert counts == sorted(counts) and len(set(counts)) == nsizes, (coll, counts)
        # then the sweep itself times every size (and checks it)
        assert {i for *_, i in timed} >= {3}, coll
