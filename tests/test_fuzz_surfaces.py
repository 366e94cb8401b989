"""Generated hostile input per surface (issue 28): doctor, suite, export,
import, report, compare, show, recover.  Each example ends in exit 0, or one
line on stderr and a documented status, never a traceback; numbers that
reach a table are checked; nothing is written outside the named place; a
value never becomes markup or a line of a batch script.

The CLI runs in-process (`test_fuzz_cli.call`); the doctor always gets an
``--out`` naming a FIFO, so that no check ever launches.
``bench/fuzz_surfaces.py`` runs 10^4 of these.
"""
import json
import os
import re
import shlex

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ccbench_kit import markup
from ccbench_kit.dataset import io, make_dataset
from hypothesis import HealthCheck, settings
from test_fuzz_cli import FLOATS, INTS, NAMES, call, place  # noqa: F401

# fast in the suite (each example writes and reads files); bench/fuzz_surfaces.py
# sets FUZZ_EXAMPLES for its 10^4
FUZZ = settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", "4")), deadline=None,
                derandomize="FUZZ_SEED" not in os.environ, database=None,
                suppress_health_check=list(HealthCheck))

TEXT = st.one_of(st.text(max_size=30), st.sampled_from(
    ["<script>x</script>", "[a](javascript:b)", "../../x", "a\nb", "$(id)", "`id`", "'; id; '",
     "/etc/passwd", "\x00", "é", "%s%n", "{f}"]))
LATENCY = st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=64),
                    st.sampled_from([np.nan, -1.0, 0.0, 1e-300, 1e300, 5.0]))


def _dataset(data):
    """A results file with drawn times, names and attrs."""
    nsizes = data.draw(st.integers(0, 3))
    algs = data.draw(st.lists(TEXT.filter(lambda s: s.strip() and "\x00" not in s), min_size=1,
                              max_size=2, unique=True))
    lat = np.array(data.draw(st.lists(LATENCY, min_size=len(algs) * nsizes * 2 * 2,
                                      max_size=len(algs) * nsizes * 2 * 2)), float)
    sizes = [8 << k for k in range(nsizes)]
    attrs = {"collective": data.draw(st.sampled_from(["all_reduce", "all_gather", "x/../y"])),
             "nranks": 2, "dtype": "fp32"}
    for key in data.draw(st.lists(st.sampled_from(["backend", "created", "command", "op",
                                                    "timing", "check", "library"]), max_size=3)):
        attrs[key] = data.draw(TEXT).replace("\x00", "")
    hosts = [data.draw(TEXT).replace("\x00", "") or "h", "h2"]
    return make_dataset(algorithms=algs, placements=["out_of_place"], sizes=sizes,
                        counts=[s // 4 for s in sizes], in_bytes=sizes, out_bytes=sizes,
                        latency=lat.reshape(len(algs), 1, nsizes, 2, 2),
                        wrong=np.zeros((len(algs), 1, nsizes), int), ranks=[0, 1], hosts=hosts,
                        devices=["cpu", "cpu"], attrs=attrs)


def _saved(place, data, name="r.nc"):
    path = place / name
    try:
        io.save(_dataset(data), path)
    except (ValueError, TypeError):        # netCDF refused a drawn value: not a file
        return None
    return path


def _bad_times(path):
    import xarray as xr
    with xr.open_dataset(path, engine="h5netcdf") as raw:
        lat = raw["latency"].values
    return bool(((lat <= 0) | np.isinf(lat)).any())


@FUZZ
@given(st.data())
def test_show_and_compare_check_every_number(place, capsys, data):
    path = _saved(place, data)
    if path is None:
        return
    bad = _bad_times(path)
    rc, err = call(["show", str(path)], capsys)
    assert (rc == 2) == bad, err
    ratio = data.draw(st.sampled_from(["0.9", "1", "1e-9"]))
    from ccbench_kit.cli import main
    rc = main(["compare", str(path), str(path), "--min-ratio", ratio])
    out, err = capsys.readouterr()
    assert "Traceback" not in err and rc in (0, 1, 2)
    assert rc != 1 or out.splitlines()[-1].startswith("FAILED"), out   # the gate says why
    if bad:
        assert rc == 2 and "latency" in err
    else:   # the same file against itself: at 1.0, or nothing comparable (a gate fails)
        assert rc in (0, 1) or "no size" in err or "nothing to compare" in err, err


@FUZZ
@given(st.data())
def test_export_writes_only_inside_its_folder(place, capsys, data):
    path = _saved(place, data)
    if path is None:
        return
    out = place / "aws"
    out.mkdir(exist_ok=True)
    before = set(os.listdir(place))
    args = ["export", str(path), "--aws-naming", str(out)]
    if data.draw(st.booleans()):
        args += ["--pattern", data.draw(TEXT)]
    if data.draw(st.booleans()):
        args += ["--nodes", data.draw(INTS)]
    call(args, capsys)
    assert set(os.listdir(place)) == before
    for f in os.listdir(out):
        assert os.path.isfile(out / f) and f.endswith("_results.csv")
        os.unlink(out / f)


@FUZZ
@given(st.data())
def test_recover_with_foreign_sidecars(place, capsys, data):
    path = _saved(place, data, "k.nc")
    if path is None:
        return
    run = data.draw(st.sampled_from(["", "0" * 32 + "-", "f" * 32 + "-"]))
    for k in range(data.draw(st.integers(0, 2))):
        side = place / f"k.nc.ccb-pending-{run}{k:05d}.npz"
        kind = data.draw(st.sampled_from(["garbage", "shape", "ok"]))
        if kind == "garbage":
            side.write_bytes(data.draw(st.binary(max_size=64)))
        else:
            shape = (1, 1, 2, 2) if kind == "ok" else (3,)
            with open(side, "wb") as f:
                np.savez(f, size=1 << 20 + k, count=1, in_bytes=1, out_bytes=1,
                         latency=np.ones(shape), wrong=np.zeros(shape[:2], int))
    call(["recover", str(path), *data.draw(st.sampled_from(
        [[], ["--run", data.draw(TEXT)], ["-o", str(place / "fifo")]]))], capsys)
    for f in place.glob("k.nc.ccb-*"):
        f.unlink()


@FUZZ
@given(st.data())
def test_import_inspector_records(place, capsys, data):
    lines = []
    for _ in range(data.draw(st.integers(1, 4))):
        perf = {"coll": data.draw(st.sampled_from(["AllReduce", "AllGather", "Frob", ""])),
                "coll_sn": data.draw(st.one_of(st.integers(-1, 3), st.sampled_from(["1", None]))),
                "coll_msg_size_bytes": data.draw(st.sampled_from([8192, 0, -1, 2**70, "x"])),
                "coll_exec_time_us": data.draw(st.sampled_from([0, 5, -3, 1.5, 2**64, None])),
                "coll_timing_source": "kernel_gpu",
                "coll_algobw_gbs": data.draw(st.sampled_from([1.638400, "nan", 0, -1, "x"])),
                "coll_busbw_gbs": data.draw(st.sampled_from([1.638400, "nan", 0, 1e308]))}
        head = {"id": "0x1", "comm_name": data.draw(TEXT), "rank": data.draw(st.integers(-1, 2)),
                "n_ranks": data.draw(st.integers(0, 2)), "nnodes": 1}
        rec = {"header": head, "metadata": {"hostname": data.draw(TEXT)}, "coll_perf": perf}
        lines.append(json.dumps(rec))
    dump = place / "h-pid1.log"
    dump.write_text("\n".join(lines) + data.draw(st.sampled_from(["\n", "", "\n{"])))
    rc, err = call(["import", str(dump), "-o", str(place / "imp.nc")], capsys)
    if rc == 0:
        import xarray as xr
        with xr.open_dataset(place / "imp.nc", engine="h5netcdf") as ds:
            lat = ds["latency"].values
            assert not ((lat <= 0) | np.isinf(lat)).any()
            assert "nan" not in ds.attrs["reported_check"] or \
                ds.attrs["reported_check"].startswith("MISMATCH")
        os.unlink(place / "imp.nc")


@FUZZ
@given(st.data())
def test_suite_values_never_reach_a_script_as_code(place, capsys, data):
    from ccbench_kit.errors import CCBenchError
    from ccbench_kit.suite import load_suite, run_suite
    import yaml
    spec = {"name": data.draw(st.sampled_from(["s", "a b", "../x", "ok.1"])), "launcher": "slurm",
            "matrix": {"collectives": ["all_reduce"], "nranks": [data.draw(st.integers(1, 3))],
                       "env": {"e": {data.draw(st.sampled_from(["A", "1A", "A;B"])):
                                     data.draw(TEXT)}}},
            "slurm": {k: data.draw(st.one_of(TEXT, st.lists(TEXT, max_size=2), INTS))
                      for k in data.draw(st.lists(st.sampled_from(
                          ["partition", "time_limit", "account", "mpi", "srun_args"]),
                          max_size=3, unique=True))},
            "workdir": data.draw(st.sampled_from(["w", "w\nx", "w x"]))}
    path = place / "s.yaml"
    path.write_text(yaml.safe_dump(spec))
    try:
        result = run_suite(load_suite(path), dry_run=True)
    except CCBenchError as e:
        assert "\n" not in str(e).split(": ", 1)[0]
        return
    for entry in result.entries:
        if not entry.script:
            continue
        text = open(entry.script, "rb").read().decode()
        lines = text.split("\n")
        directives = [ln for ln in lines if ln.startswith("#")]
        body = "\n".join(lines[len(directives):])
        lexer = shlex.shlex(body, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        assert not [w for w in lexer if w and set(w) <= set("();<>|&")], text


@FUZZ
@given(st.data())
def test_doctor_never_measures_with_a_bad_output(place, capsys, data):
    hosts = data.draw(st.lists(st.one_of(NAMES, st.sampled_from(["localhost", "a.invalid"])),
                               max_size=3))
    argv = ["doctor", "--out", str(place / "fifo")]
    if hosts:
        argv += ["--hosts", *hosts]
    for flag, values in (("--timeout", FLOATS), ("--repeats", INTS), ("--bw-size", NAMES),
                         ("--report", st.sampled_from(["x.html", "x.pdf", "/dev/null", ""]))):
        if data.draw(st.booleans()):
            argv += [flag, data.draw(values)]
    rc, _ = call(argv, capsys)
    assert rc == 2


@FUZZ
@given(st.text(max_size=200))
def test_report_markup_boundary(text):
    out = markup.markdown(text)
    assert "<" not in out and "[" not in out and "]" not in out
    assert re.sub(r"&(amp|lt|gt|#91|#93);", "", out).count("&") == 0
    assert "<" not in markup.html_text(text) and '"' not in markup.html_text(text)


@FUZZ
@given(st.data())
def test_report_refuses_before_any_kernel(place, capsys, data):
    path = _saved(place, data)
    if path is None:
        return
    call(["report", str(path), "-o", data.draw(st.sampled_from(
        [str(place / "fifo"), "/dev/null", str(place / "x.pdf"), str(place)])),
        "--title", data.draw(TEXT)], capsys)
