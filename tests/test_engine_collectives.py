"""Every collective and algorithm of the engine, checked against numpy.

One mpirun per rank count runs the whole matrix in-process through the
harness (`Sweep`, `--check random`): every (collective, algorithm,
placement) for fp32, bf16 and int8, every op for all_reduce, counts that do
not divide by the rank count (and counts smaller than it), a root that is
not rank 0, and a 64-byte pipelining segment so that segmented algorithms
cut even small messages into many pieces.  Then the CLI, as users run it.

The three data types run at 3 and 5 ranks, where counts split unevenly and
element sizes of 1, 2 and 4 bytes meet odd offsets; at 1, 2 and 4 ranks
(the single rank, and the power-of-two paths of the algorithms) fp32 alone,
as a type's arithmetic does not change with the rank count.  The matrix is
the suite's largest; this keeps `make test` within its budget.
"""
import json

import numpy as np
import pytest

from ccbench_kit.collectives import NAMES
from conftest import OVER_TCP

SCRIPT = r"""
import json, sys
import numpy as np
from mpi4py import MPI
from ccbench_kit.collectives import NAMES
from ccbench_kit.api import make_config
from ccbench_kit.dtypes import get_dtype
from ccbench_kit.harness import Sweep
from ccbench_kit.session import Session

comm = MPI.COMM_WORLD
# one session for every sweep, as a job of many parts has (one backend, one
# clock estimate and one memcpy peak): the matrix checks the collectives
p = comm.Get_size()
DTYPES = sys.argv[1].split(",")
PER_RANK = {"all_reduce", "broadcast", "reduce", "sendrecv", "permute"}
OPS = {"all_reduce": ["sum", "prod", "min", "max", "avg"], "reduce_scatter": ["sum", "avg"],
       "reduce": ["sum", "max"]}
results = {}
session = Session(comm)

def sweep(name, dtype, op, elems, **extra):
    es = get_dtype(dtype).itemsize
    cfg = make_config(name, p, sizes=[e * es for e in elems], algorithms="all", dtype=dtype,
                      op=op, root=p - 1, warmup=0, iters=1, check="random", seed=11,
                      backend_options={"segment_bytes": 64}).replace(**extra)
    ds = Sweep(comm, cfg, session=session).run()
    if comm.Get_rank() == 0:
        for a in ds.algorithm.values:
            for pl in ds.placement.values:
                for s in ds["size"].values:
                    key = f"{name}/{dtype}/{op}/{a}/{pl}/{int(s)}" + ("/meta" if extra else "")
                    results[key] = int(ds["wrong"].sel(algorithm=a, placement=pl, size=s))

for name in NAMES:
    elems = [3, 1001] if name in PER_RANK else [p, 7 * p]
    for dtype in DTYPES:
        for op in OPS.get(name, ["sum"]):
            sweep(name, dtype, op, elems)
# the default segment on a large vector: the ring's scratch slots are reused
sweep("all_reduce", "fp32", "sum", [300_001])
# nccom-test metadata: an irregular count matrix with gaps between blocks
rng = np.random.default_rng(5)
counts = rng.integers(0, 6, (p, p))
meta = []
for r in range(p):
    sd = np.cumsum(counts[r] + 1) - counts[r] - 1          # one element gap each
    rd = (np.cumsum(counts[:, r][::-1] + 2) - counts[:, r][::-1] - 2)[::-1]  # reversed order
    meta.append({"send_counts": counts[r].tolist(), "send_displs": sd.tolist(),
                 "recv_counts": counts[:, r].tolist(), "recv_displs": rd.tolist()})
sweep("alltoallv", "fp32", "sum", [p], alltoallv=meta)
perm = rng.permutation(p)
sweep("permute", "int8", "sum", [1001], pairs=[[int(s), int(perm[s])] for s in range(p)])
session.close()
if comm.Get_rank() == 0:
    print("RESULT " + json.dumps(results))
"""


def all_dtypes(nranks):
    """The data types checked at `nranks` (see the module docstring)."""
    return ["fp32", "bf16", "int8"] if nranks in (3, 5) else ["fp32"]


@pytest.mark.slow
@pytest.mark.parametrize("nranks", [1, 2, 3, 4, 5])
def test_every_algorithm_matches_numpy(mpirun, nranks, monkeypatch):
    from ccbench_kit.launch import mpi_impl
    if mpi_impl.family() == "mpich":
        # Debian's MPICH 4.0.2 (ch4:ucx) segfaults in its device-level
        # MPI_Reduce with MPI_IN_PLACE at a root other than 0 from ~1000
        # floats on (plain mpi4py does too); MPICH's generic collectives are
        # right, and the engine is what this test checks
        monkeypatch.setenv("MPIR_CVAR_DEVICE_COLLECTIVES", "none")
    dtypes = all_dtypes(nranks)
    proc = mpirun(nranks, SCRIPT, timeout=600, args=[",".join(dtypes)], env=OVER_TCP)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    line = next(l for l in proc.stdout.splitlines() if l.startswith("RESULT "))
    results = json.loads(line[len("RESULT "):])
    # alltoallv cannot run in place (MPI's form needs a symmetric matrix):
    # not checked (-1); everything else checked and right
    skipped = {k for k in results if k.startswith("alltoallv/") and "/in_place/" in k}
    assert all(results[k] == -1 for k in skipped)
    wrong = {k: v for k, v in results.items() if k not in skipped and v != 0}
    assert not wrong, wrong
    # the matrix really ran: every collective, algorithm and dtype
    from ccbench_kit.backends.mpi import engine_algorithms
    for name in NAMES:
        for alg in engine_algorithms(name):
            for dtype in dtypes:
                assert any(k.startswith(f"{name}/{dtype}/") and f"/{alg}/out_of_place/" in k
                           for k in results), (name, alg, dtype)
    ops = {k.split("/")[2] for k in results if k.startswith(f"all_reduce/{dtypes[-1]}/")}
    assert ops == {"sum", "prod", "min", "max", "avg"}
    assert any(k.endswith("/meta") and k.startswith("alltoallv/") for k in results)
    assert any(k.endswith("/meta") and k.startswith("permute/") for k in results)
    assert len(results) > 130 * len(dtypes) + 100


@pytest.fixture(scope="module")
def five_rank_cli_run(tmp_path_factory):
    """Every collective in one `ccbench run` at 5 ranks, as users run several
    (one launcher start, one results file with a part per collective, one
    table per collective): {collective: (its table's lines, its Dataset)}.
    One run for all: each `ccbench` start costs seconds of imports on 2
    cores, twelve of them a good part of the suite's budget."""
    from ccbench_kit.dataset import open_parts
    from conftest import run_cli
    out = tmp_path_factory.mktemp("cli5") / "all.nc"
    proc = run_cli("run", ",".join(NAMES), "-r", 5, "-b", "1000", "--algorithms", "all",
                   "--check", "random", "-n", 2, "-w", 1, "--root", 3, "--non-interactive",
                   "--out", out, timeout=600)
    tables, name = {}, None
    for line in proc.stdout.splitlines():
        if line.startswith("# ccbench "):
            name = line.split()[2].rstrip(":")
            tables[name] = []
        elif name is not None:
            tables[name].append(line)
    parts = open_parts(out) if proc.returncode == 0 else {}
    return proc, tables, parts


@pytest.mark.parametrize("name", NAMES)
def test_cli_all_algorithms_five_ranks(five_rank_cli_run, name):
    proc, tables, parts = five_rank_cli_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    from ccbench_kit.backends.mpi import engine_algorithms
    assert sorted(parts) == sorted(NAMES)
    ds = parts[name]
    assert list(ds.algorithm.values) == engine_algorithms(name)
    wrong = ds["wrong"].values
    if name == "alltoallv":  # out-of-place only
        assert (wrong[:, 1] == -1).all()
        wrong = wrong[:, 0]
    assert (wrong == 0).all(), wrong
    rows = [l for l in tables[name] if l.strip() and l.split()[0].isdigit()]
    assert len(rows) == len(engine_algorithms(name))
    assert all(l.split()[-1] in ("0", "N/A") for l in rows)


def test_a_wrong_result_is_counted_and_saved(mpirun, tmp_path):
    """The check can fail: one rank's ring all-gather output is corrupted by a
    golden that is off by one element; the failure is counted, reported with
    a path, and the tensors are in that file."""
    code = rf"""
from mpi4py import MPI
import numpy as np
from ccbench_kit.collectives import all_reduce
from ccbench_kit.api import make_config
from ccbench_kit.harness import Sweep
golden = all_reduce.AllReduce.golden
def off_by_one(self, inputs, rank, *a):
    g = golden(self, inputs, rank, *a).copy()
    g[5] += 0.5 * (rank == 1)
    return g
all_reduce.AllReduce.golden = off_by_one
comm = MPI.COMM_WORLD
cfg = make_config("all_reduce", 3, sizes=[400], algorithms="ring", placement="out_of_place",
                  warmup=0, iters=1, check="random", seed=3, out=r"{tmp_path}/res.nc")
ds = Sweep(comm, cfg).run()
if comm.Get_rank() == 0:
    print("WRONG", int(ds["wrong"].sum()))
"""
    proc = mpirun(3, code, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "WRONG 1" in proc.stdout
    path = tmp_path / "res.check-all_reduce-ring-out_of_place-400B-rank1.npz"
    assert f"saved to {path}" in proc.stdout
    saved = np.load(path)
    assert saved["output"].shape == saved["golden"].shape == saved["input"].shape == (100,)
    assert np.count_nonzero(np.abs(saved["output"] - saved["golden"]) > 1e-3) == 1


def test_ranks_that_disagree_are_wrong(mpirun):
    """all_reduce must leave identical bits on every rank: a rank whose output
    differs from rank 0's in the last bit is counted wrong even though it is
    within the floating-point tolerance of the golden result."""
    code = r"""
from mpi4py import MPI
import numpy as np
from ccbench_kit import checks
from ccbench_kit.collectives import get
from ccbench_kit.dtypes import get_dtype
comm = MPI.COMM_WORLD
dt = get_dtype("fp32")
golden = np.linspace(1, 2, 64)
out = golden.astype(np.float32)
if comm.Get_rank() == 2:
    out[7] = np.nextafter(out[7], np.float32(3))
    out[9] = np.nextafter(out[9], np.float32(0))
w = checks.verify(comm, get("all_reduce"), out, golden, dt, "sum", 3, np.full(64, 3.0))
w_gather = checks.verify(comm, get("reduce_scatter"), out, golden, dt, "sum", 3, np.full(64, 3.0))
counts = comm.gather((w, w_gather))
if comm.Get_rank() == 0:
    print("COUNTS", counts)
"""
    proc = mpirun(3, code, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "COUNTS [(0, 0), (0, 0), (2, 0)]" in proc.stdout, proc.stdout + proc.stderr


FP8_SCRIPT = r"""
import json
from mpi4py import MPI
from ccbench_kit.api import make_config
from ccbench_kit.harness import Sweep
from ccbench_kit.session import Session

comm = MPI.COMM_WORLD
# one session for every sweep, as a job of many parts has (one backend, one
# clock estimate and one memcpy peak): the matrix checks the collectives
p = comm.Get_size()
results = {}
session = Session(comm)
for dtype in ("fp8_e4m3", "fp8_e5m2"):
    for name, ops in (("all_reduce", ["sum", "prod", "min", "max", "avg"]),
                      ("reduce_scatter", ["sum", "avg"]), ("reduce", ["sum"]),
                      ("all_gather", ["sum"]), ("alltoall", ["sum"])):
        for op in ops:
            per_rank = name in ("all_reduce", "reduce")
            sizes = [3, 1001] if per_rank else [p, 7 * p + p]
            cfg = make_config(name, p, sizes=sizes, algorithms="all", dtype=dtype, op=op,
                              root=p - 1, warmup=0, iters=1, check="random", seed=7,
                              backend_options={"segment_bytes": 64})
            ds = Sweep(comm, cfg, session=session).run()
            if comm.Get_rank() == 0:
                for a in ds.algorithm.values:
                    results[f"{dtype}/{name}/{op}/{a}"] = ds["wrong"].sel(algorithm=a).values.tolist()
session.close()
if comm.Get_rank() == 0:
    print("RESULT " + json.dumps(results))
"""


@pytest.mark.slow
@pytest.mark.parametrize("nranks", [3, 5])
def test_fp8_reductions_match_numpy(mpirun, nranks):
    """fp8 (e4m3, e5m2) through every algorithm of the reducing collectives,
    every all_reduce op, against float64 goldens within fp8's tolerance."""
    proc = mpirun(nranks, FP8_SCRIPT, timeout=300, env=OVER_TCP)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    line = next(l for l in proc.stdout.splitlines() if l.startswith("RESULT "))
    results = json.loads(line[len("RESULT "):])
    wrong = {k: v for k, v in results.items() if any(w != 0 for pl in v for w in pl)}
    assert not wrong, wrong
    assert any(k.startswith("fp8_e5m2/all_reduce/prod/ring") for k in results)
    assert len(results) > 40
