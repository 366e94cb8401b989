"""Memory this process may really use, and the check of a run against it
before anything is launched.

MemAvailable is the machine's; a container, a systemd unit or a Slurm job
usually gets far less, and exceeding it ends in the OOM killer, not an
error.  So the limit is the least of MemAvailable, the headroom of every
memory cgroup this process is in (v2 ``memory.max - memory.current``, v1
``memory.limit_in_bytes - memory.usage_in_bytes``) and Slurm's allocation
(``SLURM_MEM_PER_NODE``, ``SLURM_MEM_PER_CPU``).
"""
import os

from .errors import ConfigError
from .units import approx_size as format_size

#: resident memory of one rank before its buffers (Python, numpy, mpi4py,
#: xarray, the engine): about 90 MB measured, rounded up
RANK_BASE_BYTES = 128 << 20
#: rank 0's copies of the per-iteration results: the gathered blocks, the
#: Dataset built from them, and the file being written
RESULT_COPIES = 3
_UNLIMITED = 1 << 60


def meminfo_available():
    """Bytes the kernel says can be allocated without swapping."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def _read_int(path):
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    if text == "max":
        return _UNLIMITED
    try:
        return int(text)
    except ValueError:
        return None


def _cgroup_dirs():
    """(folder, limit file, usage file) of each memory cgroup this process
    is in, itself and its ancestors, v2 and v1."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        hid, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if hid == "0" and controllers == "":
            mounts, files = ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"), \
                ("memory.max", "memory.current")
        elif "memory" in controllers.split(","):
            mounts, files = ("/sys/fs/cgroup/memory",), \
                ("memory.limit_in_bytes", "memory.usage_in_bytes")
        else:
            continue
        for mount in mounts:
            if not os.path.exists(os.path.join(mount, files[1])) and \
                    not os.path.isdir(os.path.join(mount, path.lstrip("/"))):
                continue
            # inside a container the mount's root may already be our cgroup
            leaf = os.path.join(mount, path.lstrip("/"))
            here = leaf if os.path.isdir(leaf) else mount
            while True:
                found.append((here, *files))
                if os.path.normpath(here) == os.path.normpath(mount):
                    break
                here = os.path.dirname(here)
            break
    return found


def cgroup_headroom():
    """Least headroom (limit - usage) over this process's memory cgroups;
    None where no limit is set."""
    least = None
    for folder, limit_file, usage_file in _cgroup_dirs():
        limit = _read_int(os.path.join(folder, limit_file))
        usage = _read_int(os.path.join(folder, usage_file))
        if limit is None or limit >= _UNLIMITED >> 2:
            continue
        room = max(limit - (usage or 0), 0)
        least = room if least is None else min(least, room)
    return least


def slurm_limit():
    """Bytes of this node's share of the Slurm job, or None outside one."""
    env = os.environ
    try:
        if env.get("SLURM_MEM_PER_NODE"):
            return int(env["SLURM_MEM_PER_NODE"]) << 20
        if env.get("SLURM_MEM_PER_CPU"):
            cpus = env.get("SLURM_CPUS_ON_NODE") or env.get("SLURM_JOB_CPUS_PER_NODE") or "1"
            return int(env["SLURM_MEM_PER_CPU"]) * int(cpus.split("(")[0].split(",")[0]) << 20
    except ValueError:
        return None
    return None


def memory_available():
    """Bytes this process (and the ranks it starts here) may still use."""
    limits = [meminfo_available(), cgroup_headroom(), slurm_limit()]
    return min(v for v in limits if v is not None)


def results_bytes(nranks, iters, nsizes, nalgorithms, nplacements):
    """Bytes of a run's per-iteration results: latency and start, float64,
    for every (algorithm, placement, size, rank, iteration)."""
    return 2 * 8 * nranks * iters * nsizes * nalgorithms * nplacements


def check_run_fits(shape, ranks_here, buffer_bytes, available=None):
    """Refuse a run, before launching it, that cannot fit in this host's memory.

    Parameters
    ----------
    shape : dict
        The run's ``nranks``, ``iters``, ``sizes``, ``algorithms`` and
        ``placements`` (counts).
    ranks_here : int
        Ranks this host will hold (rank 0 among them).
    buffer_bytes : int
        Host bytes one rank holds for the smallest size (0 where buffers
        live on a device).
    available : int, optional
        Default `memory_available()`.

    Larger sizes that do not fit are left to the sweep, which stops before
    allocating them with the earlier sizes saved (or skips them with
    --skip-oversize).
    """

    have = memory_available() if available is None else available
    n = shape
    results = results_bytes(n["nranks"], n["iters"], n["sizes"], n["algorithms"],
                            n["placements"]) * RESULT_COPIES
    base = ranks_here * RANK_BASE_BYTES
    if base > have:
        raise ConfigError(f"{ranks_here} ranks on this host need about {format_size(base)} "
                          f"before any buffer, but only {format_size(have)} of memory is "
                          "available here (cgroup, Slurm and MemAvailable)", "-r/--nworkers")
    if base + results > have:
        raise ConfigError(
            f"the per-iteration results ({n['nranks']} ranks x {n['iters']} iterations x "
            f"{n['sizes']} sizes x {n['algorithms']} algorithms x "
            f"{n['placements']} placements x 16 B, {RESULT_COPIES} copies on rank 0) need "
            f"about {format_size(results)}, but only {format_size(have - base)} of memory is "
            "available besides the ranks; use fewer iterations or sizes", "-n/--iters")
    first = base + results + ranks_here * buffer_bytes
    if first > have:
        raise ConfigError(f"even the smallest size needs about {format_size(first)} on this "
                          f"host ({ranks_here} ranks), but only {format_size(have)} of memory "
                          "is available; start from a smaller size", "-b/--minbytes")
