"""The ``ccbench`` command keeps dask out of a process that never holds a
dask array (`cli.console`), gives it back to a command that talks to a Dask
cluster, and `cli.main` (a notebook, a test) leaves its process alone."""
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BIN, run_cli

RESULTS = Path(__file__).parent / "data" / "schema" / "v1_round1_groups.nc"


def imported(argv):
    """(CompletedProcess, the modules imported) of ``python -X importtime ARGV``."""
    proc = subprocess.run([sys.executable, "-X", "importtime", *map(str, argv)],
                          capture_output=True, text=True, timeout=120)
    names = {line.split("|")[-1].strip() for line in proc.stderr.splitlines()
             if line.startswith("import time:")}
    return proc, names


# `ccbench ARGV` run by cli.console in a new process, which then says how the
# command exited (``exit N``) and runs the statements after it
_CONSOLE = ("import sys\n"
            "sys.argv = ['ccbench', *sys.argv[1:]]\n"
            "from ccbench_kit.cli import console\n"
            "try:\n"
            "    console()\n"
            "except SystemExit as e:\n"
            "    print('exit', e.code)\n")


def console_then(argv, after):
    """The CompletedProcess of ``ccbench ARGV`` in a process of its own,
    followed there by the statements `after` (what the command left in
    the process: its modules); stdout ends with ``exit N`` and then
    whatever `after` prints."""
    return subprocess.run([sys.executable, "-c", _CONSOLE + after, *map(str, argv)],
                          capture_output=True, text=True, timeout=120)


def test_show_reads_results_without_importing_dask():
    proc, names = imported(["-m", "ccbench_kit", "show", RESULTS])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "all_reduce" in proc.stdout
    assert "xarray" in names and "h5netcdf" in names  # it did read the file
    assert not {n for n in names if n.split(".")[0] in ("dask", "distributed")}


def test_a_command_imports_its_own_module_not_every_others():
    # (importlib.import_module escapes -X importtime: sys.modules says it)
    proc = console_then(["show", RESULTS], "print(sorted(m for m in sys.modules "
                                           "if m.startswith('ccbench_kit.cli.')))\n")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-2:] == ["exit 0", "['ccbench_kit.cli.show']"]


def test_version_imports_no_command():
    from ccbench_kit import __version__
    proc = console_then(["--version"], "print(sorted(m for m in sys.modules "
                                       "if m.startswith('ccbench_kit.cli.') or m == 'xarray'))\n")
    assert proc.stdout.strip().splitlines() == [f"ccbench_kit {__version__}", "exit 0", "[]"]


@pytest.mark.parametrize("argv, message", [
    (["run", "all_reduce", "-r", "0"],
     "ccbench: error: argument -r/--nworkers: must be an integer from 1 to 1048576, got 0\n"),
    (["suite", "/nonexistent/s.yaml"],
     "ccbench: error: /nonexistent/s.yaml: cannot read suite file: No such file or directory\n"),
])
def test_bad_input_is_refused_before_xarray_is_imported(argv, message):
    # the refusal is all the command does: xarray (and pandas, h5py) is what
    # a command that reads or writes results imports, 0.4 s of CPU more
    proc = console_then(argv, "print(sorted(m for m in ('xarray', 'pandas', 'h5py', "
                              "'matplotlib') if m in sys.modules))\n")
    assert proc.stderr == message
    assert proc.stdout.splitlines() == ["exit 2", "[]"]


def test_the_help_and_a_mistyped_command_list_every_command():
    from ccbench_kit.cli import SUBCOMMANDS
    helped = run_cli("--help")
    assert helped.returncode == 0
    listed = helped.stdout.split("{", 1)[1].split("}", 1)[0].split(",")
    assert listed == list(SUBCOMMANDS)
    typo = run_cli("rnu", "all_reduce")
    assert typo.returncode == 2 and typo.stdout == ""
    line, = typo.stderr.splitlines()
    assert line.startswith("ccbench: error: argument command: invalid choice: 'rnu' (choose from ")
    # quoted or not, as Python's argparse versions differ
    assert line.split("(choose from ", 1)[1].rstrip(")").replace("'", "").split(", ") \
        == list(SUBCOMMANDS)


def test_the_command_never_builds_jsonschemas_iri_parser():
    # nbformat (under papermill) imports jsonschema, which imports its IRI
    # checker where installed; in the command's process it is left out
    proc = console_then(["show", RESULTS],
                        "import nbformat, jsonschema\n"
                        "print(sys.modules['rfc3987_syntax'] is None, 'iri' in\n"
                        "      jsonschema.Draft7Validator.FORMAT_CHECKER.checkers)\n")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-2:] == ["exit 0", "True False"]


def test_the_console_script_is_the_console_entry():
    # the installed `ccbench` runs cli.console (pyproject's [project.scripts])
    text = (BIN / "ccbench").read_text()
    assert "from ccbench_kit.cli import console" in text, text


def test_a_command_that_talks_to_a_cluster_gets_dask_back(tmp_path):
    # the doctor on a cluster needs distributed's client before it reads the
    # scheduler file: a file that is not one is the error, not the extra
    sched = tmp_path / "scheduler.json"
    sched.write_text("not json")
    proc = run_cli("doctor", "--scheduler-file", sched)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (f"ccbench: error: --scheduler-file: {sched} is not a Dask "
                           "scheduler file (Expecting value: line 1 column 1 (char 0))\n")
    # and where distributed is missing, that is what the same command says
    code = ("import sys\n"
            "sys.modules['distributed'] = None\n"
            "from ccbench_kit.cli import main\n"
            "sys.exit(main(['doctor', '--scheduler-file', sys.argv[1]]))\n")
    proc = subprocess.run([sys.executable, "-c", code, str(sched)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr == ("ccbench: error: distributed is required for this; install it "
                           "with `pip install ccbench_kit[cluster]`\n")


def test_main_in_a_process_leaves_dask_importable():
    code = ("import sys\n"
            "from ccbench_kit.cli import main\n"
            f"main(['show', {str(RESULTS)!r}])\n"
            "import dask.array\n"
            "print('dask', sys.modules['dask.array'] is not None)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "dask True"
