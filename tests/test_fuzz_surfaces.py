"""Generated hostile input per surface (issue 28): doctor, suite, export,
import, report, compare, show, recover, history and the Python API
(``ccb.load``, ``ccb.run``).  Each example ends in exit 0, or one line on
stderr and a documented status (the API: a `CCBenchError`), never a
traceback; numbers that reach a table are checked; nothing is written
outside the named place; a value never becomes markup or a line of a batch
script.

The CLI runs in-process (`test_fuzz_cli.call`); the doctor, ``ccb.run``
and ``history report`` always get an output naming a FIFO (or a folder, or
a device), so that no check, rank or kernel ever starts.
``bench/fuzz_surfaces.py`` runs 10^4 of these (with ``run``'s own test in
tests/test_fuzz_cli.py).
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
from ccbench_kit.dataset.schema import KINDS
import ccbench_kit as ccb
from ccbench_kit.errors import CCBenchError
from hypothesis import HealthCheck, settings
from test_fuzz_cli import FLOATS, INTS, NAMES, SIZES, call, place, tally  # noqa: F401


def fuzz(weight=1.0):
    """Fast in the suite (4 examples: each writes and reads files);
    bench/fuzz_surfaces.py sets FUZZ_EXAMPLES, and a test takes `weight`
    times that many: fewer where an example writes a netCDF file (~0.4 s),
    more where it only parses."""
    given_n = os.environ.get("FUZZ_EXAMPLES")
    n = max(1, round(int(given_n) * weight)) if given_n else 4
    return settings(max_examples=n, deadline=None, derandomize="FUZZ_SEED" not in os.environ,
                    database=None, suppress_health_check=list(HealthCheck))


FUZZ = fuzz(0.25)   # an example writes and reads a netCDF file

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


def _facts(path):
    """(a time that is no time, a measured size of a collective the kit
    does not know) of a saved file, read with plain xarray."""
    import xarray as xr
    with xr.open_dataset(path, engine="h5netcdf") as raw:
        lat = raw["latency"].values
        unknown = raw.attrs.get("collective") == "x/../y" and raw.sizes.get("size", 0) > 0
    return bool(((lat <= 0) | np.isinf(lat)).any()), unknown


@FUZZ
@given(st.data())
def test_show_and_compare_check_every_number(place, capsys, data):
    path = _saved(place, data)
    if path is None:
        return
    bad, unknown = _facts(path)    # an unknown collective has no bus factor
    rc, err = call(["show", str(path)], capsys)
    assert (rc == 2) == (bad or unknown), err
    if unknown and not bad:
        assert f"{path}: attr collective: unknown collective 'x/../y'" in err, err
    ratio = data.draw(st.sampled_from(["0.9", "1", "1e-9"]))
    from ccbench_kit.cli import main
    rc = main(["compare", str(path), str(path), "--min-ratio", ratio])
    out, err = capsys.readouterr()
    assert "Traceback" not in err and rc in (0, 1, 2)
    assert rc != 1 or out.splitlines()[-1].startswith("FAILED"), out   # the gate says why
    if bad:
        assert rc == 2 and "latency" in err
    elif unknown:
        assert rc in (1, 2), err   # refused, or a gate with nothing comparable
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


@fuzz(2.0)
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


@fuzz(2.0)
@given(st.data())
def test_suite_values_never_reach_a_script_as_code(place, capsys, data):
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
        tally("refused")
        return
    tally("written")
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


@fuzz(1.5)
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


@fuzz(1.0)
@given(st.text(max_size=200))
def test_report_markup_boundary(text):
    tally("markup")
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


HISTORY_OUT = st.sampled_from(["{fifo}", "/dev/null", "{place}", "x.pdf", ""])


@fuzz(0.4)
@given(st.data())
def test_history_actions(place, capsys, data):
    """Every action of ``history`` on a history folder, a file, a FIFO or
    nothing; results files with drawn times and names, garbage and FIFOs
    to ``add``; nothing written outside the history folder."""
    hist = place / "hist"
    names = {"fifo": str(place / "fifo"), "place": str(place), "hist": str(hist)}
    where = data.draw(st.sampled_from(["{hist}", "{hist}", "{fifo}", "{place}/r.nc",
                                       "/dev/null", "", "{hist}/../hist"]))
    action = data.draw(st.sampled_from(["add", "list", "show", "check", "report", "rebuild"]))
    argv = ["history", action, "--history", where.format(**names)]
    if action == "add":
        item = data.draw(st.sampled_from(["saved", "saved", "garbage", "{fifo}", "{place}"]))
        if item == "saved":
            path = _saved(place, data)
            item = str(path) if path else "{fifo}"
        elif item == "garbage":
            (place / "g.nc").write_bytes(data.draw(st.binary(max_size=64)))
            item = str(place / "g.nc")
        argv.append(item.format(**names))
    elif action == "show":
        argv.append(data.draw(st.one_of(TEXT, st.sampled_from(["*", "all_reduce/*", "[", "**"]))))
    elif action == "check":
        for flag, values in (("--since", st.one_of(TEXT, st.sampled_from(
                ["7d", "0d", "-1d", "99999999w", "2026-13-01", "1e308h"]))),
                ("--min-change", st.one_of(FLOATS, st.sampled_from(["5%", "-5%", "inf%", "%"]))),
                ("--series", st.one_of(TEXT, st.sampled_from(["[", "*", "a/**/b"])))):
            if data.draw(st.booleans()):
                argv += [flag, data.draw(values)]
    elif action == "report":   # never a valid page: no kernel starts
        argv += ["-o", data.draw(HISTORY_OUT).format(**names)]
        if data.draw(st.booleans()):
            argv += ["--timeout", data.draw(FLOATS)]
    before, here = set(os.listdir(place)), set(os.listdir(os.getcwd()))
    rc, _ = call(argv, capsys)
    assert set(os.listdir(place)) <= before | {"hist"}
    assert set(os.listdir(os.getcwd())) == here      # `--history ""` is no history here
    if action == "report":
        assert rc == 2


@fuzz(0.25)
@given(st.data())
def test_api_load_checks_every_file(place, data):
    """``ccb.load`` (eager or in chunks) of a results file with drawn times,
    one missing a variable, garbage, a FIFO or a folder: a Dataset whose
    times are all positive finite or missing, or a `CCBenchError`."""
    import xarray as xr
    kind = data.draw(st.sampled_from(["saved", "saved", "no latency", "garbage", "fifo",
                                      "folder", "missing"]))
    path = place / "api.nc"
    if kind == "saved":
        if _saved(place, data, "api.nc") is None:
            return
    elif kind == "no latency":
        ds = _dataset(data) if data.draw(st.booleans()) else None
        try:
            attrs = {"schema": data.draw(st.sampled_from(
                ["ccbench/1", "ccbench/2", "ccbench/3", "ccbench/99", "ccbench-doctor-gpu/1",
                 "", "x"]))}
            if data.draw(st.booleans()):
                attrs["kind"] = data.draw(st.sampled_from(["sweep", "gpu-check", "", "x\n"]))
            (ds.drop_vars("latency") if ds is not None else xr.Dataset(
                {"x": ("a", np.ones(2))}, attrs=attrs)).to_netcdf(path, engine="h5netcdf")
        except (ValueError, TypeError):
            return
    elif kind == "garbage":
        path.write_bytes(b"\x89HDF\r\n\x1a\n" * data.draw(st.integers(0, 1))
                         + data.draw(st.binary(max_size=200)))
    else:
        path = {"fifo": place / "fifo", "folder": place, "missing": place / "nope.nc"}[kind]
    assert io.file_kind(path) in (None, *KINDS)  # the sniff never raises nor blocks
    chunks = data.draw(st.sampled_from([None, {}, "auto"]))
    try:
        loaded = ccb.load(path, chunks=chunks)
    except CCBenchError as e:
        assert str(e)
        tally("refused")
        return
    tally("loaded")
    parts = [loaded] if isinstance(loaded, xr.Dataset) else [
        n.to_dataset() for n in loaded.subtree if n.has_data]
    for ds in parts:
        if "latency" in ds:
            lat = np.asarray(ds["latency"].values)
            assert not ((lat <= 0) | np.isinf(lat)).any()


RUN_KEYS = {
    "algorithms": st.one_of(NAMES, st.lists(NAMES, max_size=3)), "dtype": NAMES, "op": NAMES,
    "root": st.one_of(st.integers(-3, 5), INTS), "placement": NAMES,
    "warmup": st.one_of(st.integers(-2, 5), INTS, FLOATS), "iters": st.one_of(st.integers(-2, 5),
                                                                              INTS),
    "check": st.sampled_from([None, "random", "all_ones", "x", True, False, 1]),
    "seed": st.one_of(st.integers(-2**70, 2**70), INTS), "timeout": st.one_of(
        st.floats(allow_nan=True, allow_infinity=True), FLOATS, st.none()),
    "minbytes": st.one_of(SIZES, st.integers(-5, 2**70)), "maxbytes": SIZES,
    "stepfactor": st.one_of(FLOATS, st.floats(allow_nan=True)), "checkpoint_every": FLOATS,
    "backend": st.sampled_from(["mpi", "nccl", "tpu", "", None]),
    "cycles": st.one_of(st.integers(-1, 3), INTS), "split": NAMES,
    "alltoallv_pattern": st.one_of(NAMES, st.sampled_from(["zipf:inf", "zipf:nan", "hot:2",
                                                           "zipf:1.5"])),
    "bogus_keyword": st.just(1),
}


@fuzz(3.0)
@given(st.data())
def test_api_run_refuses_before_any_rank(place, data):
    """``ccb.run`` with drawn keywords and sizes and ``out`` a FIFO: every
    argument is checked and the FIFO refused at the latest, as a
    `CCBenchError` (a keyword that is not one: TypeError); no rank starts."""
    collective = data.draw(st.one_of(NAMES, st.sampled_from(["all_reduce", "all_gather"])))
    nranks = data.draw(st.one_of(st.none(), st.integers(-1, 4), INTS))
    sizes = data.draw(st.one_of(st.none(), st.lists(st.one_of(SIZES, st.integers(-5, 2**66)),
                                                    max_size=3)))
    keys = data.draw(st.lists(st.sampled_from(sorted(RUN_KEYS)), max_size=4, unique=True))
    kw = {k: data.draw(RUN_KEYS[k]) for k in keys}
    try:
        ccb.run(collective, nranks, sizes, out=str(place / "fifo"), progress=False, **kw)
    except TypeError:
        assert "bogus_keyword" in kw or not isinstance(nranks, (int, type(None))), kw
        tally("TypeError")
    except CCBenchError as e:
        assert str(e)
        tally("refused")
    else:
        raise AssertionError(f"ran with out= a FIFO: {collective} {nranks} {sizes} {kw}")


# -- issue 37: the history gate, baselines, compare's kinds, the API's types ------

BASE_RUN = os.path.join(os.path.dirname(__file__), "data", "history", "base-allreduce-3r.nc")


def _gate_history(place):
    """A history of one real run, filed once for the module."""
    hist = place / "gate"
    if not hist.exists():
        ccb.history.add(BASE_RUN, hist)
    return hist


@fuzz(1.0)
@given(st.data())
def test_history_gate_spellings(place, capsys, data):
    """``history check`` with drawn --since, --min-change and --series: a
    bare --min-change of 1 or more, or a --series that matches nothing,
    is exit 2, never a pass."""
    hist = _gate_history(place)
    argv = ["history", "check", "--history", str(hist)]
    change = data.draw(st.one_of(st.none(), FLOATS, INTS, st.sampled_from(
        ["5", "5%", "0.05", "1", "0", "12.5", "1e1", "50 %", "%5"])))
    series = data.draw(st.one_of(st.none(), TEXT, st.sampled_from(
        ["all_reduce/*", "all_redcue/*", "*", "[", "all_reduce/mpi/*/1024/*"])))
    since = data.draw(st.one_of(st.none(), TEXT, st.sampled_from(["7d", "2w", "1h", "2026-01-01"])))
    for flag, value in (("--min-change", change), ("--series", series), ("--since", since)):
        if value is not None:
            argv += [flag, value]
    rc, err = call(argv, capsys)
    bare = change is not None and not str(change).strip().endswith("%")
    try:
        if bare and 1 <= float(str(change).strip()) < 10:
            assert rc == 2 and "needs its unit" in err, (argv, err)
    except ValueError:
        pass
    with ccb.history.open(hist) as h:
        if series is not None and "\x00" not in series and not h.series(series):
            assert rc == 2, (argv, err)


def _json_values(leaves):
    return st.recursive(leaves, lambda kids: st.one_of(
        st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=8), kids, max_size=4)),
        max_leaves=30)


BASELINE_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-10, 10), st.text(max_size=6),
                            st.floats(allow_nan=True, allow_infinity=True),
                            st.sampled_from([0, -0.82, 1e-300, 1e308, "fast", 25e6]))


@fuzz(2.0)
@given(st.data())
def test_baseline_files_are_checked_whole(place, data):
    """A valid baseline with one drawn change (a sample, a label, a
    shape, a key), or drawn JSON, a BOM or garbage bytes: `baseline.load`
    returns a baseline whose every sample is finite and positive, or one
    ConfigError naming --baseline."""
    from test_doctor_verdict import fake_raw
    from ccbench_kit.health import baseline, results
    path = place / "b.json"
    good = baseline.as_dict(results.figures(fake_raw(seed=7)), "--save-baseline")
    kind = data.draw(st.sampled_from(["mutate", "mutate", "json", "bytes"]))
    if kind == "json":
        body = json.dumps(data.draw(_json_values(BASELINE_LEAVES))).encode()
    elif kind == "bytes":
        body = data.draw(st.binary(max_size=200))
    else:
        fig = good["figures"][sorted(good["figures"])[0]]
        target = data.draw(st.sampled_from(["sample", "row", "labels", "dims", "better",
                                            "figures", "identity", "deep"]))
        value = data.draw(_json_values(BASELINE_LEAVES))
        if target == "sample":
            node = fig["samples"]
            while isinstance(node[0], list):
                node = node[data.draw(st.integers(0, len(node) - 1))]
            node[data.draw(st.integers(0, len(node) - 1))] = value
        elif target == "row":
            fig["samples"][0] = value
        elif target == "deep":
            fig["samples"][0] = json.loads("[" * 80 + "]" * 80)
        elif target in ("labels", "dims", "better"):
            fig[target] = value
        else:
            good[target] = value
        body = json.dumps(good).encode()
    if data.draw(st.booleans()):
        body = b"\xef\xbb\xbf" + body
    path.write_bytes(body)
    try:
        base = baseline.load(path)
    except CCBenchError as e:
        assert isinstance(e, ccb.ConfigError) and e.flag == "--baseline", e
        tally("refused")
        return
    for f in base.figures.values():
        stack = [f["samples"]]
        while stack:
            node = stack.pop()
            if isinstance(node, list):
                stack.extend(node)
            else:
                assert node is None or (np.isfinite(node) and node > 0 and
                                        not isinstance(node, bool)), node
    tally("loaded")


@FUZZ
@given(st.data())
def test_compare_refuses_files_of_another_kind(place, capsys, data):
    """A results file that records a doctor's verdict, on either side of
    ``compare``: one line, exit 2."""
    path = _saved(place, data)
    if path is None:
        return
    import xarray as xr
    with xr.open_dataset(path, engine="h5netcdf") as raw:
        ds = raw.load()
    ds.attrs["doctor_verdict"] = json.dumps({"line": data.draw(TEXT)})
    doctor = place / "doctor.nc"
    ds.to_netcdf(doctor, engine="h5netcdf")
    pair = [str(doctor), str(path)] if data.draw(st.booleans()) else [str(path), str(doctor)]
    rc, err = call(["compare", *pair], capsys)
    assert rc == 2, err


API_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 4), st.floats(), st.text(max_size=5),
                       st.binary(max_size=3), st.lists(st.integers(), max_size=2),
                       st.dictionaries(st.text(max_size=3), st.one_of(st.text(max_size=3),
                                                                      st.integers()), max_size=2))


@fuzz(3.0)
@given(st.data())
def test_api_types_are_config_errors(place, data):
    """``ccb.run`` / ``run_many`` with drawn types for nranks, env and out
    (out never a usable file): a CCBenchError, never a TypeError or
    ValueError of Python's own; no rank starts."""
    nranks = data.draw(API_VALUES)
    env = data.draw(API_VALUES)
    out = data.draw(st.one_of(   # text is a path: only the FIFO and a folder
        API_VALUES.filter(lambda v: v is not None and not isinstance(v, str)),
        st.just(str(place / "fifo")), st.just(str(place))))
    fn = data.draw(st.sampled_from([ccb.run, ccb.run_many]))
    try:
        fn("all_reduce", nranks, [8], out=out, env=env, progress=False)
    except CCBenchError as e:
        assert str(e)
        tally("refused")
    else:
        raise AssertionError(f"ran: {fn.__name__} {nranks!r} {env!r} {out!r}")


# -- issue 37, round three: launch input, environments, filed runs, shm ------

_ONE_HOST = ["localhost", "127.0.0.1", "::1", "127.0.0.2"]


@fuzz(1.5)
@given(st.data())
def test_doctor_host_names_and_sizes_refused_before_launch(place, capsys, data):
    """Two names of this host are always among the drawn hosts (so nothing
    can launch), with drawn other names, sizes and backends: one line,
    exit 2, naming --hosts or a size flag, and no results file."""
    import socket
    two = data.draw(st.lists(st.sampled_from(_ONE_HOST + [socket.gethostname()]), min_size=2,
                             max_size=2, unique=True))
    others = data.draw(st.lists(st.sampled_from(["192.0.2.7", "192.0.2.8", "a.invalid", "n1"]),
                                max_size=2, unique=True))
    hosts = data.draw(st.permutations(two + others))
    out = place / "never.nc"
    argv = ["doctor", "--hosts", ",".join(hosts), "--out", str(out)]
    for flag, values in (("--bw-size", st.one_of(SIZES, st.sampled_from(["3G", "4G", "2G"]))),
                         ("--local-size", SIZES), ("--backend", st.sampled_from(["mpi", "tcp"])),
                         ("--timeout", st.sampled_from(["1", "0.5", "60"]))):
        if data.draw(st.booleans()):
            argv += [flag, data.draw(values)]
    rc, err = call(argv, capsys)
    assert rc == 2 and not out.exists(), (argv, err)
    # argparse's own line for a value that looks like a flag ('-inf') is one too
    assert re.match(r"ccbench: error: (argument )?(--hosts|--bw-size|--local-size|--timeout|"
                    r"--backend)", err), err


@fuzz(2.0)
@given(st.data())
def test_environment_sizes_are_checked_before_anything_runs(place, data):
    """Drawn environments near Linux's limits, through the API (``env=``)
    and a suite's ``matrix.env``: an entry past 128 KiB, or all past half
    of ARG_MAX, is one ConfigError naming the field; the rest pass whole."""
    import yaml
    from ccbench_kit import run_fields
    from ccbench_kit.suite import load_suite
    limit = run_fields.ENV_ENTRY_MAX
    lengths = data.draw(st.lists(st.one_of(st.integers(0, 64), st.integers(limit - 8, limit + 8),
                                           st.integers(limit // 2, limit)), max_size=20))
    env = {f"V{i}": "x" * n for i, n in enumerate(lengths)}
    sizes = [len(f"{k}={v}".encode()) + 1 for k, v in env.items()]
    bad = any(s > limit for s in sizes) or sum(sizes) > run_fields.env_total_max()
    if data.draw(st.booleans()):
        try:
            ccb.run("all_reduce", 2, [8], env=env, out=str(place / "fifo"), progress=False)
        except CCBenchError as e:
            assert not bad or str(e).startswith("env: "), str(e)[:200]
            tally("refused")
        else:
            raise AssertionError("ran")
        return
    path = place / "env.yaml"
    path.write_text(yaml.safe_dump({"name": "s", "matrix": {"collectives": ["all_reduce"],
                                                             "nranks": [2], "env": {"e": env}}}))
    try:
        load_suite(path)
    except CCBenchError as e:
        assert bad and str(e).startswith(f"{path}: matrix.env.e: "), str(e)[:200]
        tally("refused")
    else:
        assert not bad
        tally("read")


@pytest.fixture(scope="module")
def filed(tmp_path_factory):
    """A results file's bytes, and its content name's place in a history."""
    from ccbench_kit._files import sha256_of
    d = tmp_path_factory.mktemp("filed")
    sizes = [8, 16]
    ds = make_dataset(algorithms=["ring"], placements=["out_of_place"], sizes=sizes,
                      counts=[2, 4], in_bytes=sizes, out_bytes=sizes,
                      latency=np.full((1, 1, 2, 2, 2), 5.0), wrong=np.zeros((1, 1, 2), int),
                      ranks=[0, 1], hosts=["h", "h"], devices=["cpu", "cpu"],
                      attrs={"collective": "all_reduce", "nranks": 2, "dtype": "fp32"})
    io.save(ds, d / "r.nc")
    digest = sha256_of(d / "r.nc")
    target = d / "h" / "runs" / digest[:2] / f"{digest}.nc"
    target.parent.mkdir(parents=True)
    return (d / "r.nc").read_bytes(), target


@fuzz(1.0)
@given(st.data())
def test_a_filed_run_is_read_only_as_it_was_filed(filed, capsys, data):
    """A filed run with a drawn byte changed (or none): ``show`` and
    ``ccb.load`` refuse it in one line naming the file, or read it whole."""
    original, target = filed
    data_ = bytearray(original)
    changed = data.draw(st.booleans())
    if changed:
        at = data.draw(st.integers(0, len(data_) - 1))
        data_[at] ^= data.draw(st.integers(1, 255))
    target.write_bytes(bytes(data_))
    if data.draw(st.booleans()):
        rc, err = call(["show", str(target)], capsys)
        assert (rc == 2 and f"{target}: its bytes do not match its name" in err) if changed \
            else rc == 0, err
        return
    try:
        ccb.load(target)
    except CCBenchError as e:
        assert changed and str(e).startswith(f"{target}: its bytes do not match its name")
        tally("refused")
    else:
        assert not changed
        tally("read")


@fuzz(3.0)
@given(st.data())
def test_shared_memory_cleanup_takes_only_its_jobs_files(place, data):
    """Drawn /dev/shm-like folders: `leftovers.remove_segments` removes the
    segments of this user and this job family, and nothing else."""
    from ccbench_kit.launch import leftovers
    import pathlib
    import tempfile
    folder = pathlib.Path(tempfile.mkdtemp(prefix="shm", dir=place))
    family = data.draw(st.integers(0, 0xFFFF))
    uid = os.geteuid()
    names = data.draw(st.lists(st.one_of(
        st.builds(lambda kind, host, u, fam, local, rank: f"{kind}_segment.{host}.{u}."
                  f"{(fam << 16) | local:x}.{rank}",
                  st.sampled_from(["vader", "sm", "psm2"]), st.sampled_from(["h", "a.b", "x.1"]),
                  st.sampled_from([uid, uid + 1]), st.sampled_from([family, family ^ 1]),
                  st.integers(0, 3), st.integers(0, 9)),
        st.text(alphabet="abcdef0123456789._", min_size=1, max_size=30)), max_size=8, unique=True))
    for n in names:
        if n not in (".", ".."):
            (folder / n).write_bytes(b"")
    removed = {os.path.basename(p) for p in leftovers.remove_segments(family, str(folder))}
    for n in removed:
        kind, _, rest = n.partition("_segment.")
        fields = rest.split(".")
        assert kind in ("vader", "sm") and fields[-3] == str(uid)
        assert int(fields[-2], 16) >> 16 == family
    assert set(os.listdir(folder)) == {n for n in names if n not in (".", "..")} - removed
    tally("checked")
