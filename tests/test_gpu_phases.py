"""The own kernels' phases timed alone (``NAME:launch``, ``NAME:barrier``):
what each compiles to (NVRTC, PTX for sm_90 on this CPU machine), how a run
takes them (never in ``all``, never checked), how the report splits them
off into "where the time goes", and on a GPU that they run beside the whole
kernel while the whole one is still checked."""
import re
from pathlib import Path

import numpy as np
import pytest

from ccbench_kit.backends import gpu_kernels, phases_of
from ccbench_kit.backends.gpu_kernels import _nvrtc, _registry
from ccbench_kit.backends.nccl import NCCLBackend, own_kernel
from ccbench_kit.config import build
from ccbench_kit.dataset import save
from ccbench_kit.dataset.schema import make_dataset
from ccbench_kit.errors import ConfigError
from ccbench_kit.report import analysis
from ccbench_kit.report.parameters import prepare
from ccbench_kit.report.header import _sections

from test_gpu_kernels import NGPU, NRANKS, NVRTC, needs_nvrtc
from test_nccl_gpu import _mpirun_n
from conftest import run_cli


def test_every_peer_kernel_has_a_launch_and_a_barrier_phase():
    assert NCCLBackend.phase_algorithms("all_reduce") == {
        "oneshot:launch": ("oneshot", "launch"), "oneshot:barrier": ("oneshot", "barrier"),
        "oneshot-ll:launch": ("oneshot-ll", "launch"),
        "oneshot-ll:barrier": ("oneshot-ll", "barrier"),
        "twoshot:launch": ("twoshot", "launch"), "twoshot:barrier": ("twoshot", "barrier")}
    assert set(NCCLBackend.phase_algorithms("all_gather")) == {"direct:launch",
                                                               "direct:barrier"}
    assert NCCLBackend.phase_algorithms("alltoall") == {}  # no own kernel
    m, phase = own_kernel("all_reduce", "twoshot:barrier")
    assert (m.NAME, phase) == ("twoshot", "barrier")
    assert own_kernel("all_reduce", "lsa:launch") == (None, "")  # nccl-tests' -D kernel: none
    assert own_kernel("all_reduce", "nccl:ring") == (None, "")


def _config(algorithms):
    return build("all_reduce", nranks=2, sizes=[8], backend="nccl", algorithms=algorithms)


def test_a_run_takes_the_phases_by_name_and_all_leaves_them_out():
    cfg = _config("oneshot,oneshot:launch,oneshot:barrier")
    assert cfg.sweep.algorithms == ("oneshot", "oneshot:launch", "oneshot:barrier")
    every = _config("all").sweep.algorithms
    assert "oneshot" in every and not [a for a in every if a.endswith((":launch", ":barrier"))]
    with pytest.raises(ConfigError) as e:
        _config("oneshot:copy")
    assert str(e.value).startswith("--algorithms: unknown algorithm 'oneshot:copy' for all_reduce on "
                                   "backend nccl; choose from nccl, ")
    assert str(e.value).endswith(", oneshot, oneshot-ll, twoshot, oneshot:launch, oneshot:barrier, "
                                 "oneshot-ll:launch, oneshot-ll:barrier, twoshot:launch, "
                                 "twoshot:barrier or all")


def _ptx(name, phase, folder):
    data, _ = _nvrtc.image(NVRTC, gpu_kernels.find("all_reduce", name), "compute_90",
                           folder=folder, phase=phase)
    return data.decode()


@needs_nvrtc
def test_each_phase_compiles_to_what_it_times(tmp_path):
    for name in ("oneshot", "twoshot"):
        whole, meets, launch = (_ptx(name, p, str(tmp_path)) for p in ("", "barrier", "launch"))
        # the barrier: a release store to each peer's flag, an acquire load of one's own
        for text in (whole, meets):
            assert "st.release.sys.global.u32" in text and "ld.acquire.sys.global.u32" in text
        assert "st.release.sys" not in launch and "ld.acquire.sys" not in launch
        # the data: 16-byte words moved by the wide entries, in the whole kernel only
        assert "ld.global.v4.u32" in whole or "ld.v4.u32" in whole
        for text in (meets, launch):
            assert ".v4.u32" not in text, name
        # every entry is there in every phase, with the call's bookkeeping (atomicAdd)
        for text in (whole, meets, launch):
            for dt in gpu_kernels.ELEMENT_TYPES:
                for suffix in ("", "_v"):
                    assert f".entry {name}_{dt}{suffix}(" in text
            assert "atom.global.add.u32" in text
    # the LL one-shot: its lines (data and flag in one 16-byte volatile store)
    # in the whole kernel, one empty line a block in its barrier, none in its launch
    whole, meets, launch = (_ptx("oneshot-ll", p, str(tmp_path)) for p in ("", "barrier", "launch"))
    for text in (whole, meets):
        assert "st.volatile.global.v4.u32" in text and "ld.volatile.global.v4.u32" in text
    assert ".volatile.global.v4" not in launch and "atom.global.add.u32" in launch
    # each phase is its own cached image
    assert len(list(tmp_path.glob("oneshot-*"))) == 3
    assert len(list(tmp_path.glob("oneshot-launch-*"))) == 1


def _breakdown_ds(times, sizes=(1024, 1 << 20), nranks=2):
    """A nccl all_reduce Dataset whose every rank and iteration of
    algorithm a at size j took times[a][j] µs."""
    algs = list(times)
    lat = np.array([[[[[times[a][j]] * 5] * nranks for j in range(len(sizes))]] for a in algs],
                   dtype=float)
    return make_dataset(algorithms=algs, placements=["out_of_place"], sizes=list(sizes),
                        counts=[s // 4 for s in sizes], in_bytes=list(sizes),
                        out_bytes=list(sizes), latency=lat,
                        wrong=np.zeros(lat.shape[:3], dtype=int), ranks=list(range(nranks)),
                        hosts=["a"] * nranks, devices=[f"gpu{r}" for r in range(nranks)],
                        attrs={"collective": "all_reduce", "dtype": "fp32", "op": "sum",
                               "root": -1, "nranks": nranks, "backend": "nccl"})


def test_the_breakdown_is_the_differences_of_the_phases():
    ds = _breakdown_ds({"nccl": [12.0, 40.0], "oneshot": [7.5, 30.0],
                        "oneshot:launch": [2.5, 2.5], "oneshot:barrier": [4.0, 4.5],
                        "twoshot": [9.0, 20.0], "twoshot:launch": [3.0, 3.0]})
    phases = phases_of(ds)
    assert phases == {"oneshot:launch": ("oneshot", "launch"),
                      "oneshot:barrier": ("oneshot", "barrier"),
                      "twoshot:launch": ("twoshot", "launch")}
    rows = analysis.phase_breakdown(ds, phases)
    got = [(r["algorithm"], r["size"], r["whole"], r["launch"], r["barrier"], r["data"])
           for r in rows]
    assert got[:2] == [("oneshot", 1024, 7.5, 2.5, 1.5, 3.5),
                       ("oneshot", 1 << 20, 30.0, 2.5, 2.0, 25.5)]
    # twoshot's barrier phase was not run: its barrier and data are unknown
    assert [r[:4] for r in got[2:]] == [("twoshot", 1024, 9.0, 3.0),
                                        ("twoshot", 1 << 20, 20.0, 3.0)]
    assert all(np.isnan(r["barrier"]) and np.isnan(r["data"]) for r in rows[2:])


def test_the_report_keeps_the_phases_out_of_the_whole_algorithms(tmp_path):
    ds = _breakdown_ds({"nccl": [12.0, 40.0], "oneshot": [7.5, 30.0],
                        "oneshot:launch": [2.5, 2.5], "oneshot:barrier": [4.0, 4.5]})
    ctx = prepare(str(save(ds, tmp_path / "r.nc")))
    assert list(ctx.parts["all_reduce"]["algorithm"].values) == ["nccl", "oneshot"]
    full, phases = ctx.phases["all_reduce"]
    assert list(full["algorithm"].values) == ["nccl", "oneshot", "oneshot:launch",
                                              "oneshot:barrier"]
    assert _sections(ctx, "all_reduce")[:4] == ["busbw", "fit", "winner", "phases"]
    # a run without them has no such section
    plain = prepare(str(save(ds.sel(algorithm=["nccl", "oneshot"]), tmp_path / "p.nc")))
    assert plain.phases == {} and "phases" not in _sections(plain, "all_reduce")


def test_the_report_of_one_rank_shows_the_phases(tmp_path):
    """One GPU, one rank (an all_reduce with a bus factor of 0: no busbw, no
    time ratio): the report renders, with the breakdown's table.  Needs
    the report extra, which the GPU machines, running this file, lack."""
    pytest.importorskip("papermill")
    ds = _breakdown_ds({"nccl": [5.0, 6.0], "oneshot": [5.25, 7.0],
                        "oneshot:launch": [3.5, 3.75], "oneshot:barrier": [4.5, 4.5]}, nranks=1)
    save(ds, tmp_path / "r.nc")
    proc = run_cli("report", tmp_path / "r.nc", "-o", tmp_path / "r.html", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "r.html").read_text()
    section = text[text.index('id="sec-all-reduce--phases"'):]
    cells = re.findall(r"<td>([^<]*)</td>", section[:section.index("</table>")])
    assert cells == ["oneshot", "1 KiB", "5.2", "3.5 (67 %)", "1.0 (19 %)", "0.8 (14 %)",
                     "oneshot", "1 MiB", "7.0", "3.8 (54 %)", "0.8 (11 %)", "2.5 (36 %)"]
    assert "No time ratios: " in text and "the bus factor of all_reduce is 0" in text


@pytest.mark.gpu
@pytest.mark.skipif(NGPU < 1, reason="needs NVRTC, NCCL and a GPU")
def test_phases_run_beside_the_whole_kernel_which_is_still_checked():
    res = _mpirun_n(NRANKS, """
        algs = ["oneshot", "oneshot:launch", "oneshot:barrier", "twoshot", "twoshot:barrier"]
        ds = ccbench_kit.run("all_reduce", sizes=[8, 1 << 20], algorithms=algs, check="random",
                             seed=3, backend="nccl", warmup=2, iters=5)
        if rank == 0:
            out["wrong"] = {a: ds["wrong"].sel(algorithm=a).values.tolist() for a in algs}
            out["finite"] = {a: bool(np.isfinite(ds["latency"].sel(algorithm=a).values).all())
                             for a in algs}
            out["ran"] = json.loads(ds.attrs["nccl_ran"])
            out["median"] = {a: float(ds["latency"].sel(algorithm=a).median()) for a in algs}
    """)
    assert all(res["finite"].values()), res
    for a, wrong in res["wrong"].items():
        want = 0 if ":" not in a else -1  # a phase alone is not the collective: not checked
        assert all(w == want for p in wrong for w in p), (a, wrong)
    assert set(res["ran"]) >= {"oneshot:launch", "oneshot:barrier", "twoshot:barrier"}
    assert all(r.startswith("oneshot_fp32") for r in res["ran"]["oneshot:launch"].values())


@needs_nvrtc
def test_the_worked_example_of_a_new_gpu_algorithm_compiles_in_every_phase():
    """docs/architecture.md's direct broadcast, as its reader copies it: the
    kernel compiles whole and in each phase, and its phases move no data."""
    doc = (Path(__file__).resolve().parent.parent / "docs" / "architecture.md").read_text()
    part = doc[doc.index("### A new GPU algorithm"):]
    source = re.search(r"```cuda\n(.*?)```", part, re.S).group(1)
    common = _registry.read(_registry.COMMON)
    # as `_nvrtc.image` compiles them: the whole kernel with no option
    options = {"whole": [], **{p: [f"-DCCB_PHASES={n}"] for p, n in _registry.PHASES.items()}}
    images = {phase: NVRTC.compile(source, "broadcast_direct.cu", {_registry.COMMON: common},
                                   "compute_90", opts).decode()
              for phase, opts in options.items()}
    for text in images.values():
        assert ".entry broadcast_direct_bf16_v(" in text
    assert ".v4.u32" in images["whole"]
    assert ".v4.u32" not in images["barrier"] and ".v4.u32" not in images["launch"]


def test_the_progress_lines_best_busbw_leaves_the_phases_out():
    # 1 MiB on 2 ranks (bus factor 1): the whole one-shot in 10 us is
    # 104.9 GB/s; its launch alone, in 1 us, is no all_reduce at 1 TB/s
    from types import SimpleNamespace
    from ccbench_kit import collectives
    from ccbench_kit.api import make_config
    from ccbench_kit.harness import Sweep
    cfg = make_config("all_reduce", 2, sizes=[1 << 20], backend="nccl",
                      algorithms="oneshot,oneshot:launch")
    sweep = SimpleNamespace(cfg=cfg, coll=collectives.get("all_reduce"), nranks=2,
                            backend=NCCLBackend)
    lat = np.empty((2, 1, 2, 3))  # (algorithm, placement, rank, iteration), us
    lat[0], lat[1] = 10.0, 1.0
    busbw = Sweep._busbw(sweep, SimpleNamespace(size=1 << 20), lat)
    assert busbw == pytest.approx((1 << 20) / 10e3)
