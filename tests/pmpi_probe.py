"""Build and read tests/data/pmpi_probe.c: a PMPI library preloaded into the
ranks that logs the engine's MPI_Allreduce / MPI_Barrier calls and can delay
one rank at a known call.  Real MPI, observed from the outside."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

SOURCE = Path(__file__).parent / "data" / "pmpi_probe.c"


def build(directory):
    """Compile the probe into `directory`; skip when there is no mpicc."""
    mpicc = shutil.which("mpicc")
    if mpicc is None:
        pytest.skip("mpicc is needed to build the PMPI probe")
    lib = Path(directory) / "libccbprobe.so"
    subprocess.run([mpicc, "-shared", "-fPIC", "-O1", "-o", str(lib), str(SOURCE)],
                   check=True, capture_output=True, text=True, timeout=120)
    return lib


def env(lib, log, counts, delay=None):
    """Environment for `ccbench run` with the probe preloaded."""
    e = dict(os.environ)
    e["LD_PRELOAD"] = str(lib)
    e["CCB_PROBE_LOG"] = str(log)
    e["CCB_PROBE_COUNTS"] = ",".join(str(c) for c in counts)
    if delay:
        e["CCB_PROBE_DELAY"] = ":".join(str(x) for x in delay)
    return e


def read(log, rank):
    """Rank `rank`'s log lines, as lists of fields."""
    return [line.split() for line in Path(f"{log}.{rank}").read_text().splitlines()]


def pattern(lines):
    """'A'/'B' string of the allreduce calls and the barriers on their communicator."""
    comms = {f[-1] for f in lines if f[0] == "A"}
    return "".join(f[0] for f in lines if f[-1] in comms)
