"""``ccbench run`` prints the tables rank 0 formatted (`api.run_many`'s
`table`, event ``table``) and, for one part, never reads the results file
back: its launcher does not import xarray.  What it prints is what the file
gives, line for line."""
import subprocess
import sys

import pytest

from ccbench_kit import api, dataset
from ccbench_kit.dataset.stats import check_average
from ccbench_kit.errors import ConfigError
from ccbench_kit.formats.nccl_tests.write_table import run_lines

# `ccbench ARGV` in a process of its own, then whether it imported xarray
_CONSOLE = """
import sys
from ccbench_kit.cli import console
sys.argv = ["ccbench", *sys.argv[1:]]
try:
    console()
except SystemExit as e:
    code = e.code
print("@@xarray", "xarray" in sys.modules, code)
"""


def _ccbench(*argv):
    proc = subprocess.run([sys.executable, "-c", _CONSOLE, *map(str, argv)], capture_output=True,
                          text=True, timeout=180)
    *lines, last = proc.stdout.splitlines()
    _, imported, code = last.split()
    return lines, imported == "True", int(code), proc.stderr


def _tables(lines):
    """The printed lines from the first table's title to the results line."""
    first = next(k for k, line in enumerate(lines) if line.startswith("# ccbench "))
    end = next(k for k, line in enumerate(lines) if line.startswith("# results: "))
    return lines[first:end]


@pytest.mark.parametrize("collectives,reads_back", [("all_reduce", False),
                                                    ("all_gather,reduce_scatter", True)])
def test_the_table_is_rank_0s_and_the_files(tmp_path, collectives, reads_back):
    out = tmp_path / "r.nc"
    lines, imported, code, err = _ccbench(
        "run", collectives, "-r", 3, "-b", 8, "-e", 1000, "-f", 5, "-n", 3, "-w", 1, "--check",
        "-t", "avg", "p50", "-a", 1, "--show-input-output-size", "--out", out)
    assert code == 0, err
    # one part goes straight into its file; several are gathered into one
    # file by the launcher, which reads them for that
    assert imported is reads_back
    opts = dict(stats=["avg", "p50"], rank_stat=check_average("1"), show_io=True)
    want = []
    for name, ds in dataset.open_parts(out).items():
        want += run_lines(name, ds, **opts)
    assert _tables(lines) == want
    assert sum(line.startswith("# Out of bounds values : 0 OK") for line in want) == \
        len(collectives.split(","))


def test_a_table_of_unknown_options_is_one_line_naming_it():
    with pytest.raises(ConfigError) as e:
        api.run_many("all_reduce", 2, [8], table={"colour": "red"})
    assert str(e.value).startswith("table: {'colour': 'red'}: not keywords of "
                                   "write_table.run_lines (")
