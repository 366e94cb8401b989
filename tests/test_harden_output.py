"""Nothing from a file reaches a terminal or a spreadsheet live (issue 37):
one place escapes control characters for the terminal (markup.terminal),
one neutralises formulas for CSV (markup.csv_cell); `compare` refuses a
results file of another kind and a plot it cannot write, in one line."""
import csv
import io
import json
from pathlib import Path

import numpy as np
import xarray as xr

from ccbench_kit.cli import main
from ccbench_kit.dataset import open_parts, save
from ccbench_kit.dataset.schema import make_dataset
from ccbench_kit.formats.csv.write import csv_text, summary_frame
from ccbench_kit.markup import csv_cell, terminal

BASE = Path(__file__).parent / "data" / "history" / "base-allreduce-3r.nc"
TITLE = "\x1b]0;pwned\x07"      # sets the terminal's title
CLEAR = "\x1b[2J\x1b[H"          # clears the screen


def run(capsys, *argv):
    capsys.readouterr()
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_terminal_escapes_every_control_character():
    assert terminal(f"lib{TITLE}x") == "lib\\x1b]0;pwned\\x07x"
    assert terminal("a\rb\nc\x00\x9b") == "a\\rb\\nc\\x00\\x9b"
    assert terminal("a\x1b\nb", lines=True) == "a\\x1b\nb"
    assert terminal("µs → ok, ünïcode") == "µs → ok, ünïcode"   # printable text is kept


def test_csv_cells_starting_like_a_formula_are_inert_numbers_are_kept():
    for cell in ("=HYPERLINK(\"http://x\",\"y\")", "+1+1", "-2+3", "@SUM(A1)", "\t=1", "\r=1"):
        assert csv_cell(cell) == "'" + cell
    assert csv_cell(-3.5) == -3.5 and csv_cell("ring") == "ring" and csv_cell(7) == 7
    frame = summary_frame(_hostile_dataset())
    rows = list(csv.DictReader(io.StringIO(csv_text(frame))))
    assert rows[0]["algorithm"] == "'=HYPERLINK(\"http://evil\",\"x\")"
    assert rows[0]["source"] == "'@evil" and rows[0]["op"] == "'-sum"
    assert float(rows[0]["time_avg_us"]) == 10.5       # numbers stay numbers


def _hostile_dataset():
    lat = np.arange(1, 25, dtype=float).reshape(1, 1, 2, 3, 4)
    return make_dataset(algorithms=['=HYPERLINK("http://evil","x")'], placements=["out_of_place"],
                        sizes=[1024, 2048], counts=[256, 512], in_bytes=[1024, 2048],
                        out_bytes=[1024, 2048], latency=lat, wrong=np.zeros((1, 1, 2)),
                        ranks=[0, 1, 2], hosts=["a", "b", "b"], devices=["", "", ""],
                        attrs={"collective": "all_gather", "dtype": "fp32", "nranks": 3,
                               "op": "-sum", "source": "@evil",
                               "created": "2026-03-04T05:06:07+00:00"})


def _hostile_file(tmp_path):
    parts = {k: v.load() for k, v in open_parts(str(BASE)).items()}
    for ds in parts.values():
        ds.attrs["library"] = f"Open MPI{TITLE}"
        ds.attrs["created"] = f"2026-01-01{CLEAR}"
    path = tmp_path / "hostile.nc"
    save(parts, path)
    return path


def test_show_and_export_keep_a_files_text_inert(tmp_path, capsys):
    path = _hostile_file(tmp_path)
    rc, out, _ = run(capsys, "show", path)
    assert rc == 0 and "\x1b" not in out and "\x07" not in out
    assert "Open MPI\\x1b]0;pwned\\x07" in out and "2026-01-01\\x1b[2J\\x1b[H" in out
    rc, out, _ = run(capsys, "export", path, "--csv")
    assert rc == 0 and "\x1b" not in out.replace("\\x1b", "")


def test_compare_refuses_a_doctor_results_file(tmp_path, capsys):
    run_file = tmp_path / "run.nc"
    parts = {k: v.load() for k, v in open_parts(str(BASE)).items()}
    save(parts, run_file)
    for ds in parts.values():   # what `ccbench doctor` records in its results file
        ds.attrs["doctor_verdict"] = json.dumps({"line": "verdict: none"})
    doctor = tmp_path / "doctor.nc"
    save(parts, doctor)
    rc, out, err = run(capsys, "compare", doctor, run_file)
    assert rc == 2 and out == ""
    assert err.strip() == (f"ccbench: error: BASELINE: {doctor}: a `ccbench doctor` results "
                           "file, not a collective's results; compare takes `ccbench run` "
                           "results or an imported baseline (a doctor run is judged against "
                           "`doctor --baseline`)")
    rc, _, err = run(capsys, "compare", run_file, doctor)
    assert rc == 2 and err.startswith(f"ccbench: error: RUN: {doctor}: a `ccbench doctor`")


def test_compare_plot_needs_an_image_name(tmp_path, capsys):
    rc, out, err = run(capsys, "compare", BASE, BASE, "--plot", tmp_path / "x.txt")
    assert rc == 2 and out == "" and not (tmp_path / "x.txt").exists()
    assert err.strip() == (f"ccbench: error: --plot: {tmp_path / 'x.txt'}: a plot is .png, "
                           ".svg, .pdf; name it NAME.png")


def test_an_output_that_is_an_input_is_refused_before_reading(tmp_path, capsys):
    copy = tmp_path / "r.nc"
    copy.write_bytes(BASE.read_bytes())
    before = copy.read_bytes()
    for argv, flag in ((["export", copy, "--csv", copy], "--csv"),
                       (["compare", copy, BASE, "--csv", tmp_path / "." / "r.nc"], "--csv"),
                       (["import", copy, "-o", copy], "-o/--out")):
        rc, out, err = run(capsys, *argv)
        assert rc == 2 and out == "", err
        assert err.startswith(f"ccbench: error: {flag}: ") and " is also " in err, err
        assert copy.read_bytes() == before
