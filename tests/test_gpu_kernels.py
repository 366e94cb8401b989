"""The kit's own GPU algorithms (backends/gpu_kernels): their registry, the
NVRTC compile of every kernel (to PTX for sm_90, on this CPU machine, where
NVRTC is installed: the ``nvidia-cuda-nvrtc`` wheel of the test extra, or
``CCB_NVRTC_LIBRARY``), the cache, and, on a GPU machine, every kernel
checked against numpy in one mpirun (ranks share a GPU where fewer are lent:
CUDA IPC works between processes of one GPU; `bench/gpu_kernels.sh`)."""
import json
import os
import re
import struct

import pytest

from ccbench_kit.backends import gpu_kernels, nccl
from ccbench_kit.backends.gpu_kernels import _devapi, _nvrtc, _registry


def _nvrtc_or_reason():
    try:
        return _nvrtc.load()
    except _nvrtc.NvrtcError as e:
        return str(e)


NVRTC = _nvrtc_or_reason()
needs_nvrtc = pytest.mark.skipif(isinstance(NVRTC, str), reason=f"no NVRTC here: {NVRTC}"[:300])


def test_every_algorithm_is_two_files_and_listed_after_ncclS():
    algs = {(c, n): m for c, n, m in gpu_kernels.all_algorithms()}
    assert set(algs) == {("all_reduce", "oneshot"), ("all_reduce", "oneshot-ll"),
                         ("all_reduce", "twoshot"), ("all_gather", "direct"),
                         ("reduce_scatter", "direct"), ("all_reduce", "lsa"),
                         ("all_reduce", "lsa-vec")}
    for (coll, name), m in algs.items():
        source = _registry.read(m.SOURCE)
        stem = _registry.kernel_base(m)
        assert m.__name__.rsplit(".", 1)[1] == stem  # NAME.py beside NAME.cu
        if gpu_kernels.is_devapi(m):  # nccl-tests' -D kernels, on NCCL's device API
            assert f"CCB_DEVAPI_KERNELS({stem})" in source and '#include "devapi.cuh"' in source
        else:
            assert f"CCB_KERNELS({stem})" in source and '#include "common.cuh"' in source
        assert nccl.nccl_algorithms(coll)[-len(gpu_kernels.names_for(coll)):] == \
            gpu_kernels.names_for(coll)
    assert gpu_kernels.names_for("all_reduce") == ["lsa", "lsa-vec", "oneshot", "oneshot-ll",
                                                   "twoshot"]
    assert [algs[("all_reduce", n)].DEVICE_IMPLEMENTATION for n in ("lsa", "lsa-vec")] == [1, 2]
    assert gpu_kernels.find("all_reduce", "direct") is None
    # the staging buffer each needs, for 1001 elements on 3 ranks
    assert algs[("reduce_scatter", "direct")].staging_elems(1001, 3) == 3003
    assert algs[("all_reduce", "twoshot")].parallel_elems(1001, 3) == 334


def _nvrtc_algorithms():
    """The own algorithms NVRTC compiles (the device-API ones take nvcc)."""
    return [(c, n, m) for c, n, m in gpu_kernels.all_algorithms() if not gpu_kernels.is_devapi(m)]


def test_the_kernel_argument_matches_the_c_side():
    """common.cuh's KArgs and ext/nccl_api.h's ccbn_kargs: the same fields,
    in the same order (cuLaunchKernel copies the bytes)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(here, "ext", "nccl_api.h")) as f:
        c = re.search(r"typedef struct ccbn_kargs \{(.*?)\} ccbn_kargs;", f.read(), re.S).group(1)
    cu = re.search(r"struct KArgs \{(.*?)\};", _registry.read("common.cuh"), re.S).group(1)

    def fields(text):
        text = re.sub(r"/\*.*?\*/|//[^\n]*", "", text, flags=re.S)
        return [re.sub(r"\[.*?\]", "[]", f.strip().split()[-1]) if i == 0 else
                re.sub(r"\[.*?\]", "[]", f.strip())
                for decl in text.split(";") if decl.strip()
                for i, f in enumerate(decl.strip().split(",")) if f.strip()]
    assert fields(c) == fields(cu) == ["send", "recv", "count", "stage[]", "signal[]",
                                       "seq", "half", "rank", "nranks"]


@pytest.fixture(scope="module")
def ptx_folder(tmp_path_factory):
    """One image cache for the tests that read every kernel's PTX: each
    kernel is compiled once, not once a test."""
    return str(tmp_path_factory.mktemp("ptx"))


@needs_nvrtc
def test_every_kernel_compiles_to_ptx_for_sm_90(ptx_folder):
    for coll, name, m in _nvrtc_algorithms():
        data, path = _nvrtc.image(NVRTC, m, "compute_90", folder=ptx_folder)
        ptx = data.rstrip(b"\0").decode()
        assert ".target sm_90" in ptx, path
        entries = set(re.findall(r"\.entry\s+(\w+)", ptx))
        assert entries == {gpu_kernels.kernel_name(m, dt, wide) for dt in gpu_kernels.ELEMENT_TYPES
                           for wide in (False, True)}
        if getattr(m, "STAGE", "") == "ll":  # LL lines: 16-byte volatile stores and loads
            assert "st.volatile.global.v4.u32" in ptx and "ld.volatile.global.v4.u32" in ptx
            assert "st.release.sys" not in ptx and "ld.acquire.sys" not in ptx
        else:
            # the wide entries move 16 bytes a load and store
            assert "ld.global.v4.u32" in ptx or "ld.global.nc.v4.u32" in ptx
            # the barrier's flags: system-scope release and acquire
            assert "st.release.sys.global.u32" in ptx and "ld.acquire.sys.global.u32" in ptx
        if coll != "all_gather":  # the sums round back to 16 bits once
            assert "cvt.rn.bf16.f32" in ptx and "cvt.rn.f16.f32" in ptx
        assert os.path.basename(path).startswith(f"{_registry.kernel_base(m)}-")


def _nvcc_and_headers():
    """(nvcc, NCCL include folder) for the device-API kernels, or why not:
    nvcc is on this machine, NCCL's headers where `make test` unpacked the
    nvidia-nccl wheel's include folder (``CCB_NCCL_INCLUDE``)."""
    try:
        nvcc = _devapi.find_nvcc()
    except _devapi.DevApiError as e:
        return str(e)
    include = os.environ.get("CCB_NCCL_INCLUDE", "")
    if not os.path.isfile(os.path.join(include, "nccl_device.h")):
        return f"no nccl_device.h in CCB_NCCL_INCLUDE={include!r}"
    return nvcc, include


NVCC = _nvcc_and_headers()
needs_nvcc = pytest.mark.skipif(isinstance(NVCC, str), reason=f"no nvcc or NCCL headers: {NVCC}")


@needs_nvcc
def test_device_api_kernels_compile_with_nvcc_and_the_host_side_agrees(tmp_path):
    """nccl-tests' -D kernels compile for sm_90 with NCCL's device headers,
    an entry per element type; the host side fills an argument of the
    kernels' layout (two windows, two offsets, the count, then NCCL's
    device communicator) and is cached by source and target."""
    import ctypes
    nvcc, include = NVCC
    for name in ("lsa", "lsa-vec"):
        m = gpu_kernels.find("all_reduce", name)
        path = _devapi.build(nvcc, include, m.SOURCE, "sm_90", folder=str(tmp_path))
        with open(path, "rb") as f:
            cubin = f.read()
        assert cubin[:4] == b"\x7fELF"
        for dt in gpu_kernels.ELEMENT_TYPES:
            assert gpu_kernels.kernel_name(m, dt).encode() + b"\0" in cubin
        assert _devapi.build(nvcc, include, m.SOURCE, "sm_90", folder=str(tmp_path)) == path
    # cached by target too: another architecture is another build (one
    # kernel shows it; each nvcc compile costs seconds of CPU)
    assert _devapi.build(nvcc, include, m.SOURCE, "sm_80", folder=str(tmp_path)) != path
    so = _devapi.build(nvcc, include, _devapi.HOST_SOURCE, "host", folder=str(tmp_path),
                       host=True)
    lib = ctypes.CDLL(so)
    lib.ccbd_devcomm_bytes.restype = lib.ccbd_args_bytes.restype = ctypes.c_size_t
    devcomm = lib.ccbd_devcomm_bytes()
    assert devcomm > 0 and lib.ccbd_args_bytes() == 5 * 8 + devcomm
    lib.ccbd_args.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_size_t, ctypes.c_void_p] + \
        [ctypes.c_size_t] * 2
    comm = bytes(range(256))[:devcomm]
    out = ctypes.create_string_buffer(lib.ccbd_args_bytes())
    lib.ccbd_args(out, comm, 0x1000, 24, 0x2000, 48, 1001)
    assert struct.unpack("<5Q", out.raw[:40]) == (0x1000, 0x2000, 24, 48, 1001)
    assert out.raw[40:] == comm


def test_missing_nvcc_or_headers_are_one_line_naming_the_places(tmp_path, monkeypatch):
    env = {"PATH": str(tmp_path), "CUDA_HOME": str(tmp_path / "cuda")}
    # CUDA's default folder, where the search ends, as on a machine without it
    monkeypatch.setattr(_devapi, "FALLBACK_NVCC", str(tmp_path / "default" / "nvcc"))
    with pytest.raises(_devapi.DevApiError) as e:
        _devapi.find_nvcc(env)
    assert str(e.value) == (
        "nvcc not found (NCCL's device headers need CCCL, which NVRTC lacks); looked in: "
        f"{tmp_path}/cuda/bin/nvcc; PATH; {tmp_path}/default/nvcc. Install a CUDA toolkit or "
        "set CUDA_HOME")
    # headers of another NCCL than the one loaded: named, with their version
    inc = tmp_path / "nccl" / "include"
    inc.mkdir(parents=True)
    (inc / "nccl.h").write_text("#define NCCL_VERSION_CODE 22803\n")
    (inc / "nccl_device.h").write_text("")
    lib = tmp_path / "nccl" / "lib" / "libnccl.so.2"
    with pytest.raises(_devapi.DevApiError) as e:
        _devapi.find_headers(str(lib), 22809, {"CCB_NCCL_INCLUDE": str(inc)})
    assert str(e.value).startswith(
        f"NCCL's device headers found are not the loaded NCCL 2.28.9's: {inc} (NCCL 2.28.3)")
    assert _devapi.find_headers(str(lib), 22803, {}) == str(inc)  # the library's ../include


def test_each_staging_half_holds_what_its_kernel_writes_there():
    """The words a kernel stores into one half (common.cuh's `staged`
    offsets), for element and 16-byte words, odd counts, 2-8 ranks, never
    pass the half `staging_elems` asks for."""
    mods = {(c, n): m for c, n, m in gpu_kernels.all_algorithms()}
    for p in range(2, 9):
        for count in (1, 2, 7, 8, 24, 1000, 1001, 4 * 3 * 1001 + 4, (1 << 20) + 12):
            for lanes in (1, 4, 8):  # an element a word; 16-byte words of fp32, of fp16
                if count % lanes:
                    continue  # the host takes 16-byte words only where the count allows
                n = count // lanes
                chunk = -(-n // p)
                written = {("all_reduce", "oneshot"): p * n,       # slot [r] of n words
                           ("all_reduce", "twoshot"): 2 * p * chunk,  # p slots, p results
                           ("all_gather", "direct"): p * n,
                           ("reduce_scatter", "direct"): p * n}
                for key, words in written.items():
                    assert words * lanes <= mods[key].staging_elems(count, p), (key, p, count)
            for size in (2, 4):  # LL: p slots of 16-byte lines, 8 data bytes a line
                lines = -(-count * size // 8)
                assert p * lines * 16 <= mods["all_reduce", "oneshot-ll"].staging_elems(
                    count, p) * size, (p, count, size)


@needs_nvrtc
def test_a_one_shot_call_meets_once_and_fences_nothing(ptx_folder):
    """The barrier count per call common.cuh's halves allow: one-shot,
    all_gather and reduce_scatter one release store each, two-shot two, the
    LL one-shot none (its flags travel with the data); no system fence
    beside the release (it only cost time)."""
    stores = {"oneshot": 1, "twoshot": 2, "allgather_direct": 1, "reduce_scatter_direct": 1,
              "oneshot_ll": 0}
    for coll, name, m in _nvrtc_algorithms():
        data, _ = _nvrtc.image(NVRTC, m, "compute_90", folder=ptx_folder)
        ptx = data.rstrip(b"\0").decode()
        assert "fence.sc.sys" not in ptx and "membar.sys" not in ptx
        for entry in re.split(r"\.entry\s+", ptx)[1:]:
            assert entry.count("st.release.sys.global.u32") == stores[_registry.kernel_base(m)]


@needs_nvrtc
def test_images_are_cached_by_source_and_target(tmp_path):
    m = gpu_kernels.find("all_reduce", "oneshot")
    data, path = _nvrtc.image(NVRTC, m, "compute_90", folder=str(tmp_path))
    assert path.endswith("-compute_90.ptx") and open(path, "rb").read() == data
    with open(path, "wb") as f:  # a cache hit reads the file, compiles nothing
        f.write(b"cached")
    assert _nvrtc.image(NVRTC, m, "compute_90", folder=str(tmp_path)) == (b"cached", path)
    _, other = _nvrtc.image(NVRTC, m, "compute_80", folder=str(tmp_path))
    assert other != path and other.endswith("-compute_80.ptx")
    assert sorted(os.listdir(tmp_path)) == sorted([os.path.basename(path),
                                                   os.path.basename(other)])


@needs_nvrtc
def test_a_kernel_that_does_not_compile_says_its_first_error():
    with pytest.raises(_nvrtc.NvrtcError) as e:
        NVRTC.compile('#include "common.cuh"\nextern "C" __global__ void k() { undefined(); }\n',
                      "broken.cu", {"common.cuh": _registry.read("common.cuh")}, "compute_90")
    msg = str(e.value)
    assert msg.startswith("broken.cu does not compile for compute_90: broken.cu(2): error:")
    assert "undefined" in msg and len(msg.splitlines()) == 1


def test_missing_nvrtc_is_one_line_naming_the_places(tmp_path):
    env = {"CCB_NVRTC_LIBRARY": str(tmp_path / "libnvrtc.so.13")}
    found = _nvrtc.nccl_lib.find("nvrtc", env)
    if found.path:
        pytest.skip(f"an NVRTC is installed where the search goes on: {found.path}")
    with pytest.raises(_nvrtc.NvrtcError) as e:
        _nvrtc.load(env)
    msg = str(e.value)
    assert msg.startswith(f"NVRTC (libnvrtc.so) not found; looked in: $CCB_NVRTC_LIBRARY="
                          f"{tmp_path / 'libnvrtc.so.13'} (no such file)")
    assert msg.endswith("To get it: pip install nvidia-cuda-nvrtc, or set CUDA_HOME")
    assert len(msg.splitlines()) == 1


def test_cache_folder_follows_the_environment():
    assert _nvrtc.cache_dir({"CCB_KERNEL_CACHE": "/x"}) == "/x"
    assert _nvrtc.cache_dir({"XDG_CACHE_HOME": "/c"}) == "/c/ccbench_kit/gpu_kernels"


def test_a_refused_algorithm_is_one_line_under_the_table():
    """A kernel that can't run (here: no peer access, as `_peers` words it)
    leaves NaN in the Dataset and one line naming it and why in the table."""
    import numpy as np
    from ccbench_kit.dataset.schema import make_dataset
    from ccbench_kit.formats.nccl_tests.write_table import format_table
    lat = np.full((2, 1, 2, 2, 3), 10.0)
    lat[1] = np.nan
    why = "no peer access from GPU 0000:19:00.0 to 0000:3b:00.0 (ranks 0 and 1)"
    ds = make_dataset(algorithms=["nccl", "oneshot"], placements=["out_of_place"],
                      sizes=[1024, 1 << 20], counts=[256, 1 << 18], in_bytes=[1024, 1 << 20],
                      out_bytes=[1024, 1 << 20], latency=lat, wrong=np.full((2, 1, 2), -1),
                      ranks=[0, 1], hosts=["a", "a"], devices=["gpu0", "gpu1"],
                      attrs={"collective": "all_reduce", "dtype": "fp32", "nranks": 2,
                             "not_available": json.dumps({"oneshot": {"1024": why,
                                                                      "1048576": why}})})
    lines = format_table(ds)
    assert [ln for ln in lines if "not available" in ln] == [
        f"# not available: oneshot: {why} (2 sizes)"]


# -- on a GPU --------------------------------------------------------------------
from test_nccl_gpu import _N, _mpirun_n  # noqa: E402  (one launcher for the GPU tests)

NGPU = _N if isinstance(_N, int) and not isinstance(NVRTC, str) else 0
# 3 ranks where fewer GPUs are lent (they share: a check, not a measurement)
NRANKS = min(NGPU, 4) if NGPU >= 3 else 3
# sizes: one element a rank (fp16), half an LL line past a whole one (12 B), a count
# no rank count divides, 1 MiB + 12 B, 24 MiB
SIZES = [8, 12, 4 * 3 * 1001 + 4, (1 << 20) + 12, 24 << 20]


@pytest.mark.gpu
@pytest.mark.skipif(NGPU < 1, reason="needs NVRTC, NCCL and a GPU")
def test_own_kernels_match_numpy_on_the_gpu():
    res = _mpirun_n(NRANKS, f"""
        algs = {{"all_reduce": ["nccl", "oneshot", "oneshot-ll", "twoshot"], "all_gather": ["nccl", "direct"],
                 "reduce_scatter": ["nccl", "direct"]}}
        for coll, names in algs.items():
            for dt in ("fp32", "bf16", "fp16"):
                ds = ccbench_kit.run(coll, sizes={SIZES!r}, algorithms=names, dtype=dt,
                                     check="random", seed=11, backend="nccl", warmup=1, iters=2,
                                     placement="both")
                if rank == 0:
                    out[f"{{coll}}/{{dt}}"] = {{
                        "wrong": {{a: ds["wrong"].sel(algorithm=a).values.tolist() for a in names}},
                        "finite": {{a: bool(np.isfinite(ds["latency"].sel(algorithm=a).values).all())
                                   for a in names}},
                        "ran": json.loads(ds.attrs["nccl_ran"]),
                        "na": json.loads(ds.attrs["not_available"]),
                        "ranks_per_gpu": int(ds.attrs["ranks_per_gpu"]),
                        "sizes": len(ds["size"])}}
        # a CUDA graph of the iterations, replayed: the epochs live on the device
        ds = ccbench_kit.run("all_reduce", sizes=[4096 + 12],
                             algorithms=["oneshot", "oneshot-ll", "twoshot"],
                             check="random", seed=2, backend="nccl", warmup=1, iters=3,
                             timing="graph", backend_options={{"graph_launches": 2}})
        if rank == 0:
            out["graph"] = {{"wrong": ds["wrong"].values.tolist(),
                            "finite": bool(np.isfinite(ds["latency"].values).all())}}
        # what they lack: refused in one line, the run goes on
        ds = ccbench_kit.run("all_reduce", sizes=[64], algorithms=["oneshot"], dtype="int32",
                             backend="nccl", warmup=0, iters=1)
        ds2 = ccbench_kit.run("all_reduce", sizes=[64], algorithms=["twoshot"], op="max",
                              backend="nccl", warmup=0, iters=1)
        if rank == 0:
            out["refused"] = [json.loads(ds.attrs["not_available"]),
                              json.loads(ds2.attrs["not_available"])]
    """)
    shared = NRANKS > NGPU
    for key, v in res.items():
        if key in ("graph", "refused"):
            continue
        coll = key.split("/")[0]
        own = [a for a in v["wrong"] if a != "nccl"]
        for a in own:
            assert v["finite"][a], (key, a, v["na"])
            assert all(w == 0 for p in v["wrong"][a] for w in p), (key, a, v["wrong"][a])
            assert len(v["ran"][a]) == v["sizes"]
            assert all(r.startswith(_registry.kernel_base(gpu_kernels.find(coll, a)) + "_")
                       for r in v["ran"][a].values()), v["ran"][a]
        assert v["ranks_per_gpu"] == (-(-NRANKS // NGPU) if shared else 1)
        if shared:  # NCCL refused, the own kernels measured
            assert not v["finite"]["nccl"] and len(v["na"]["nccl"]) == v["sizes"]
            assert all("NCCL needs one GPU per rank" in r for r in v["na"]["nccl"].values())
    assert res["graph"]["finite"] and all(w == 0 for a in res["graph"]["wrong"]
                                          for p in a for w in p), res["graph"]
    int32, op_max = res["refused"]
    assert list(int32["oneshot"].values()) == ["oneshot has fp32, fp16, bf16 kernels, not int32"]
    assert list(op_max["twoshot"].values()) == ["twoshot has sum kernels, not max"]


@pytest.mark.gpu
@pytest.mark.skipif(NGPU < 2, reason="needs NCCL, a GPU a rank (2 or more) and nvcc")
def test_device_api_kernels_match_numpy_on_the_gpu():
    """nccl-tests' -D 1 and -D 2 kernels (`lsa`, `lsa-vec`) on symmetric
    windows: every element type, odd counts, in place, in a CUDA graph;
    without -R 2 they are refused in one line and NCCL's runs on."""
    n = min(NGPU, 4)
    res = _mpirun_n(n, f"""
        names = ["nccl", "lsa", "lsa-vec"]
        for dt in ("fp32", "bf16", "fp16"):
            ds = ccbench_kit.run("all_reduce", sizes={SIZES!r}, algorithms=names, dtype=dt,
                                 check="random", seed=11, backend="nccl", warmup=1, iters=2,
                                 placement="both", backend_options={{"register": 2}})
            if rank == 0:
                out[dt] = {{
                    "wrong": {{a: ds["wrong"].sel(algorithm=a).values.tolist() for a in names}},
                    "finite": {{a: bool(np.isfinite(ds["latency"].sel(algorithm=a).values).all())
                               for a in names}},
                    "ran": json.loads(ds.attrs["nccl_ran"]),
                    "na": json.loads(ds.attrs["not_available"]), "sizes": len(ds["size"])}}
        ds = ccbench_kit.run("all_reduce", sizes=[4096 + 12], algorithms=["lsa", "lsa-vec"],
                             check="random", seed=2, backend="nccl", warmup=1, iters=3,
                             timing="graph", backend_options={{"graph_launches": 2, "register": 2}})
        if rank == 0:
            out["graph"] = {{"wrong": ds["wrong"].values.tolist(),
                            "finite": bool(np.isfinite(ds["latency"].values).all())}}
        ds = ccbench_kit.run("all_reduce", sizes=[64], algorithms=["nccl", "lsa"], backend="nccl",
                             warmup=0, iters=1)
        if rank == 0:
            out["no_windows"] = [json.loads(ds.attrs["not_available"]),
                                 bool(np.isfinite(ds["latency"].sel(algorithm="nccl")).all())]
    """)
    for dt in ("fp32", "bf16", "fp16"):
        v = res[dt]
        for a in ("lsa", "lsa-vec"):
            assert v["finite"][a], (dt, a, v["na"])
            assert all(w == 0 for p in v["wrong"][a] for w in p), (dt, a, v["wrong"][a])
            assert len(v["ran"][a]) == v["sizes"]
            stem = _registry.kernel_base(gpu_kernels.find("all_reduce", a))
            assert all(r == f"{stem}_{dt} 16x512" for r in v["ran"][a].values()), v["ran"][a]
    assert res["graph"]["finite"] and all(w == 0 for a in res["graph"]["wrong"]
                                          for p in a for w in p), res["graph"]
    na, nccl_ran = res["no_windows"]
    assert list(na["lsa"].values()) == ["lsa runs on symmetric windows: add -R 2 (as nccl-tests' -D 1)"]
    assert nccl_ran and "nccl" not in na
