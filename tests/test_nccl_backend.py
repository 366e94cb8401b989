"""The nccl backend without a GPU: finding the libraries, the one-line
errors, algorithm names, options, and reading NCCL's TUNING log."""
import json
import os
import subprocess
import sys

import pytest

from ccbench_kit import _nccl
from ccbench_kit.backends import nccl, nccl_buffers, nccl_lib, nccl_topo, nccl_tuning
from ccbench_kit.backends.nccl import NCCL_DTYPES, NCCL_OPS
from ccbench_kit.dtypes import DTYPES
from ccbench_kit.errors import ConfigError


def _nccl_present():
    try:
        nccl_lib.locate()
        return True
    except nccl_lib.LibraryNotFound:
        return False


def _clean_env(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("CCB_NCCL_LIBRARY", "CCB_CUDART_LIBRARY", "CUDA_HOME", "CUDA_PATH")}
    env["NCCL_HOME"] = str(tmp_path / "no-nccl-here")
    return env


@pytest.mark.skipif(_nccl_present(), reason="NCCL is installed here; this checks its absence")
def test_missing_nccl_is_one_line_naming_library_and_places(tmp_path, cli):
    p = cli("run", "all_reduce", "--backend", "nccl", "--algorithms", "nccl", "-b", "8",
                "--out", tmp_path / "r.nc", "--non-interactive", env=_clean_env(tmp_path))
    assert p.returncode != 0
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    line = lines[0]
    assert line.startswith("ccbench: error: --backend nccl: libnccl.so.2 not found; looked in: "
                           "$CCB_NCCL_LIBRARY (unset); $NCCL_HOME=" + str(tmp_path / "no-nccl-here")), line
    for place in ("the nvidia-* wheels", "cuda-pathfinder", "the system loader"):
        assert place in line
    assert "Traceback" not in p.stdout + p.stderr


def test_explicit_path_that_does_not_exist_is_said(tmp_path):
    env = _clean_env(tmp_path)
    env["CCB_NCCL_LIBRARY"] = str(tmp_path / "libnccl.so.2")
    f = nccl_lib.find("nccl", env)
    assert f.looked[0] == f"$CCB_NCCL_LIBRARY={tmp_path / 'libnccl.so.2'} (no such file)"


def test_search_order_explicit_home_then_wheels(tmp_path, monkeypatch):
    wheel = tmp_path / "site" / "nvidia" / "nccl" / "lib"
    wheel.mkdir(parents=True)
    (wheel / "libnccl.so.2").write_bytes(b"")
    home = tmp_path / "home" / "lib"
    home.mkdir(parents=True)
    (home / "libnccl.so.2").write_bytes(b"")
    explicit = tmp_path / "mine.so"
    explicit.write_bytes(b"")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    env = _clean_env(tmp_path)
    assert nccl_lib.find("nccl", env).path == str(wheel / "libnccl.so.2")
    env["NCCL_HOME"] = str(tmp_path / "home")
    assert nccl_lib.find("nccl", env).path == str(home / "libnccl.so.2")
    env["CCB_NCCL_LIBRARY"] = str(explicit)
    assert nccl_lib.find("nccl", env).path == str(explicit)
    cu = tmp_path / "site" / "nvidia" / "cu13" / "lib"
    cu.mkdir(parents=True)
    (cu / "libcudart.so.13").write_bytes(b"")
    assert nccl_lib.find("cudart", env).path == str(cu / "libcudart.so.13")


def test_a_file_that_is_no_library_fails_to_open_with_its_path(tmp_path):
    bad = tmp_path / "libcudart.so.13"
    bad.write_text("not an ELF file")
    with pytest.raises(_nccl.LoadError, match=f"cannot load {bad}: .*(invalid ELF|too short|file)"):
        _nccl.Library(str(bad), str(bad))


def test_algorithm_names_and_what_they_set():
    ar = nccl.nccl_algorithms("allreduce")
    assert ar[:6] == ["nccl", "nccl:ring", "nccl:tree", "nccl:pat", "nccl:collnet_direct",
                      "nccl:collnet_chain"]
    assert "nccl:ring/ll" in ar and "nccl:tree/ll128" in ar and "nccl:pat/simple" in ar
    assert len(ar) == 1 + 5 + 15 + 5  # NCCL's, then the kit's own
    assert ar[-5:] == ["lsa", "lsa-vec", "oneshot", "oneshot-ll", "twoshot"]
    assert nccl.algorithm_env("nccl") == {}
    assert nccl.algorithm_env("nccl:ring/ll") == {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL"}
    assert nccl.algorithm_env("nccl:collnet_direct") == {"NCCL_ALGO": "CollnetDirect"}
    assert nccl.algorithm_env("nccl:tree/ll128") == {"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL128"}
    with pytest.raises(ConfigError, match="--algorithms: unknown NCCL algorithm 'nccl:ring/ll256'"):
        nccl.algorithm_env("nccl:ring/ll256")


def test_options_are_checked_before_any_rank_starts(tmp_path, cli):
    with pytest.raises(ConfigError, match="--timing: unknown timing 'wallclock'"):
        nccl.check_options(timing="wallclock")
    with pytest.raises(ConfigError, match="-G/--cudagraph: must be an integer >= 1"):
        nccl.check_options(timing="graph", graph_launches=0)
    with pytest.raises(ConfigError, match="--mem-type: unknown memory type 'cuMemMagic'"):
        nccl.check_options(mem_type="cuMemMagic")
    p = cli("run", "all_reduce", "-G", "4", "-b", "8", "--out", tmp_path / "x.nc")
    assert p.returncode == 2
    assert p.stderr.strip() == ("ccbench: error: --timing: timing 'graph' needs --backend nccl; "
                                "the mpi backend times with the host clock")


def test_register_modes_and_device_kernels_are_refused_in_one_line(capsys):
    from ccbench_kit.cli import main
    assert nccl.NCCLBackend.make_options(register=2).register == 2
    assert nccl.NCCLBackend.make_options(register=True).register == 1  # the old bool form
    with pytest.raises(ConfigError, match=r"^-R/--local-register: must be 0, 1 or 2, got 3$"):
        nccl.check_options(register=3)
    cases = [(("-D", "3"), "-D/--device-implementation: -D 3 needs NVLink multicast (multimem), "
                           "which the kit keeps off (NCCL_NVLS_ENABLE=0)"),
             (("-D", "4"), "-D/--device-implementation: -D 4 needs NVLink multicast"),
             (("-D", "1"), "-D/--device-implementation: -D 1 runs on symmetric windows: "
                           "add -R 2"),
             (("-D", "2", "-R", "1"), "-D/--device-implementation: -D 2 runs on symmetric "
                                      "windows: add -R 2"),
             (("-D", "1", "-R", "2", "-V", "0"), "-V/--device-cta-count: must be an integer from "
                                                 "1 to 128, got 0"),
             (("-D", "1", "-R", "2", "-V", "129"), "-V/--device-cta-count: must be an integer "
                                                   "from 1 to 128, got 129")]
    for args, message in cases:
        assert main(["run", "all_reduce", "--backend", "nccl", *args]) == 2, args
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"ccbench: error: {message}"), err
        assert len(err.splitlines()) == 1
    assert main(["run", "all_gather", "--backend", "nccl", "-D", "2", "-R", "2"]) == 2
    assert capsys.readouterr().err.strip() == (
        "ccbench: error: -D/--device-implementation: -D 2: nccl-tests' device-API kernels are "
        "all_reduce's; all_gather has none")


def test_d_n_makes_nccl_tests_kernel_n_the_default_algorithm():
    from ccbench_kit.api import make_config
    base = dict(sizes=[1024], backend="nccl")
    assert make_config("all_reduce", 2, **base).sweep.algorithms == ("nccl",)
    for mode, name in ((1, "lsa"), (2, "lsa-vec")):
        cfg = make_config("all_reduce", 2, backend_options={"register": 2,
                                                            "device_implementation": mode},
                          **base)
        assert cfg.sweep.algorithms == (name,)
        assert cfg.backend.options["device_ctas"] == 16
    # named algorithms are taken as named, -D beside them or not
    cfg = make_config("all_reduce", 2, algorithms="nccl,lsa,lsa-vec",
                      backend_options={"register": 2, "device_implementation": 1}, **base)
    assert cfg.sweep.algorithms == ("nccl", "lsa", "lsa-vec")


class _NcclOf:
    """What `_check_windows` asks a loaded NCCL: whether it has a symbol."""

    def __init__(self, symbols):
        self.symbols = symbols

    def has(self, name):
        return name in self.symbols


def test_symmetric_windows_need_nccl_2_27():
    with pytest.raises(ConfigError) as e:
        nccl._check_windows(_NcclOf(set()), 22603)
    assert str(e.value) == ("-R/--local-register: -R 2 (symmetric windows, "
                            "ncclCommWindowRegister) needs NCCL 2.27.0 or later; this is "
                            "NCCL 2.26.3")
    with pytest.raises(ConfigError, match="this is NCCL 2.28.9"):  # a build without the symbol
        nccl._check_windows(_NcclOf(set()), 22809)
    nccl._check_windows(_NcclOf({"ncclCommWindowRegister"}), 22809)


def test_nccl_enums_match_nccl_h():
    # nccl.h: ncclInt8 0, ncclUint8 1, ncclInt32 2, ncclUint32 3, ncclInt64 4, ncclUint64 5,
    # ncclFloat16 6, ncclFloat32 7, ncclFloat64 8, ncclBfloat16 9, and from 2.24
    # ncclFloat8e4m3 10, ncclFloat8e5m2 11; no 16-bit integers
    want = {"int8": 0, "uint8": 1, "int32": 2, "uint32": 3, "int64": 4, "uint64": 5,
            "fp16": 6, "fp32": 7, "fp64": 8, "bf16": 9, "int16": -1, "uint16": -1,
            "fp8_e4m3": 10, "fp8_e5m2": 11}
    assert {k: NCCL_DTYPES.get(k, -1) for k in DTYPES} == want
    assert NCCL_OPS == {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}
    # the loop's ids are collectives.def's order (tests/test_collective_registry.py)
    assert _nccl.KINDS[:5] == ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "alltoallv")


def test_version_strings():
    assert nccl.version_string(22809) == "2.28.9"
    assert nccl.version_string(21903) == "2.19.3"
    assert nccl.version_string(2804) == "2.8.4"


# Lines as NCCL 2.28 writes them with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING
# (with mpirun's prefix on one, as logs collected through mpirun carry).
LOG = """\
vm:2101:2101 [0] NCCL INFO AllReduce: 8 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}
[1,0]<stdout>:vm:2101:2101 [0] NCCL INFO AllReduce: 67108864 Bytes -> Algo TREE proto SIMPLE channel{Lo..Hi}={0..31}
vm:2101:2101 [0] NCCL INFO Channel 00/32 : 0 1
vm:2101:2101 [0] NCCL INFO AllGather: 4194304 Bytes -> Algo PAT proto Simple
"""
# A call on symmetric windows (-R 2), as NCCL 2.28 logs the kernel it ran.
SYM_LOG = """vm:2101:2101 [0] NCCL INFO AllReduce [Symmetric]: 2097152 Bytes -> Kernel AllReduce_RSxLD_AGxST nchannels 16 nthreads 512 nWorks 1
vm:2101:2101 [0] NCCL INFO AllReduce: 8 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}
"""


def test_tuning_lines_are_parsed_and_summarized():
    d = nccl_tuning.parse(LOG)
    assert [(x["func"], x["bytes"], x["algo"], x["proto"], x["channels"]) for x in d] == [
        ("AllReduce", 8, "RING", "LL", 1), ("AllReduce", 67108864, "TREE", "SIMPLE", 32),
        ("AllGather", 4194304, "PAT", "Simple", None)]
    assert nccl_tuning.summarize(d[:1]) == "RING/LL x1ch"
    assert nccl_tuning.summarize(d[:1] * 3) == "RING/LL x1ch"
    assert nccl_tuning.summarize(d) == "RING/LL x1ch+TREE/SIMPLE x32ch+PAT/Simple"
    assert nccl_tuning.summarize([]) == ""
    d = nccl_tuning.parse(SYM_LOG)
    assert d[0] == {"func": "AllReduce", "bytes": 2097152, "algo": "SYM",
                    "proto": "AllReduce_RSxLD_AGxST", "channels": 16}
    assert nccl_tuning.summarize(d) == "SYM/AllReduce_RSxLD_AGxST x16ch+RING/LL x1ch"


def test_tuning_capture_sets_and_restores_nccl_debug(tmp_path, monkeypatch):
    monkeypatch.setenv("NCCL_DEBUG", "WARN")
    monkeypatch.delenv("NCCL_DEBUG_SUBSYS", raising=False)
    monkeypatch.delenv("NCCL_DEBUG_FILE", raising=False)
    log = tmp_path / "tuning.log"
    seen, resets = [], []

    def reset():  # what NCCL would see at its re-read
        resets.append({k: os.environ.get(k) for k in ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE")})
        return True

    cap = nccl_tuning.TuningCapture(reset, str(log))
    with cap.capture(seen):
        log.write_text(LOG)
    assert [x["algo"] for x in seen] == ["RING", "TREE", "PAT"]
    assert resets == [{"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "TUNING", "NCCL_DEBUG_FILE": str(log)},
                      {"NCCL_DEBUG": "WARN", "NCCL_DEBUG_SUBSYS": None, "NCCL_DEBUG_FILE": None}]
    monkeypatch.setenv("NCCL_DEBUG_FILE", str(tmp_path / "users.log"))
    cap = nccl_tuning.TuningCapture(reset, str(log))
    assert not cap.enabled and "NCCL_DEBUG_FILE is set" in cap.reason


class _Lib:
    """Host memory standing in for device memory: the pool's bookkeeping only."""

    def __init__(self):
        self.live, self.allocs, self.next = {}, 0, 0x7F0000000000

    def malloc(self, nbytes, kind):
        self.allocs += 1
        self.next += nbytes
        self.live[self.next] = nbytes
        return self.next

    def free(self, ptr, kind):
        del self.live[ptr]


def test_device_buffer_views():
    pool = nccl_buffers.Pool(_Lib(), "cudaMalloc")
    b = nccl.DeviceBuffer(pool.take(20), DTYPES["bf16"], 0, 10)
    v = b[4:6]
    assert (len(b), b.nbytes, v.size, v.ptr - b.ptr, v.nbytes) == (10, 20, 2, 8, 4)
    assert b[8:20].size == 2 and b[3:3].size == 0
    with pytest.raises(ValueError):
        b[::2]
    assert not nccl_buffers.overlap(b[0:4], v) and nccl_buffers.overlap(b[3:5], v)


def test_pool_runs_every_size_in_the_largest_buffers():
    """As nccl-tests: after the largest send and receive buffers exist (the
    warm-up of every size), each size takes them again; nothing is freed or
    allocated until the pool closes; --fresh-buffers allocates every time."""
    import gc
    MiB = 1 << 20
    lib = _Lib()
    pool = nccl_buffers.Pool(lib, "cudaMalloc")
    send, recv = pool.take(64 * MiB), pool.take(256 * MiB)  # all_gather at 4 ranks
    first = {send.allocation.ptr, recv.allocation.ptr}
    del send, recv
    gc.collect()
    for n in (8, 4 * MiB, 64 * MiB):
        s, r = pool.take(n // 4), pool.take(n)
        assert s.allocation.nbytes == 64 * MiB and r.allocation.nbytes == 256 * MiB
        assert {s.allocation.ptr, r.allocation.ptr} == first
        del s, r
    assert lib.allocs == 2 and pool.free_bytes == 320 * MiB
    # a larger size than any before: the smaller free buffers go, one new one comes
    big = pool.take(512 * MiB)
    gc.collect()
    assert lib.allocs == 3 and len(lib.live) == 1 and big.allocation.nbytes == 512 * MiB
    del big

    fresh = nccl_buffers.Pool(_Lib(), "cudaMalloc", reuse=False)
    for n in (8, 4 * MiB, 8):
        x = fresh.take(n)
        assert x.allocation.nbytes == max(n, nccl_buffers.ALLOC_ALIGN)  # whole 2 MiB pages
        del x
        gc.collect()
    assert fresh.lib.allocs == 3 and fresh.lib.live == {} and fresh.free_bytes == 0


def test_pci_bus_ids_compare_across_nvml_and_cuda_spellings():
    assert nccl_topo._same_bus("00000000:06:00.0", "0000:06:00.0")
    assert not nccl_topo._same_bus("00000000:06:00.0", "0000:07:00.0")


def test_package_imports_and_lists_algorithms_without_cuda():
    code = ("import ccbench_kit.backends.nccl as n, ccbench_kit._nccl as x; "
            "print(len(n.nccl_algorithms('all_gather')), x.KINDS[-1])")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.split() == ["22", "hypercube"], p.stderr


def test_gpus_are_picked_among_all_ranks_of_a_host_not_a_groups(mpirun):
    # 4 ranks in MOD 2 groups: a group's own shared-memory split would give
    # local ranks 0,1 in both groups, so two groups would share two GPUs
    p = mpirun(4, """
import json
from mpi4py import MPI
from ccbench_kit.backends.base import host_placement
from ccbench_kit.session import split_groups
world = MPI.COMM_WORLD
_, group = split_groups(world, [[0, 2], [1, 3]])
# the harness makes the backend with world=the job's communicator, which
# NCCLBackend splits by host (Backend.world)
row = [world.Get_rank(), host_placement(world).local_rank, host_placement(group).local_rank]
rows = world.gather(row, root=0)
if world.Get_rank() == 0:
    print("ROWS", json.dumps(sorted(rows)))
""", timeout=120)
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("ROWS"))
    rows = json.loads(line[5:])
    assert [r[1] for r in rows] == [0, 1, 2, 3]      # what the backend uses
    assert sorted(r[2] for r in rows) == [0, 0, 1, 1]  # what a group's split would give
