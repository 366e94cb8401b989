"""What the machine gave a run, measured by the run and kept in its Dataset.

Two facts a report needs and cannot measure later without lying: the cores
each host had for the ranks placed on it (more ranks than cores and the
timings measure the scheduler, not the collective), and the host's memcpy
rate, the peak that host-buffer collectives are judged against.  The sweep
(`harness.Sweep.run`) calls `run_facts` once, before the first size.
"""
import functools
import os
import socket
import time

import numpy as np

from .mpi_env import quiet_barrier

MEMCPY_BYTES = 64 << 20
MEMCPY_REPEATS = 20   # best of many: one copy preempted by other work must not set the peak
# Sweeps that one process runs within this many seconds share one memcpy
# measurement (`memcpy_gbps_of_this_process`).
MEMCPY_REUSE_S = 60


def cpus_available():
    """The CPUs this process may run on (its affinity mask), as a set."""
    try:
        return set(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return set(range(os.cpu_count() or 1))


def measure_memcpy_gbps(nbytes=MEMCPY_BYTES, repeats=MEMCPY_REPEATS, budget_s=0.25):
    """This host's memcpy rate in GB/s (1e9 B/s): bytes copied / best time
    of up to `repeats` copies of `nbytes` (first touch done before timing),
    stopping after `budget_s` seconds once 3 copies are done, so that a run
    on a busy machine does not wait long for its peak."""
    src = np.ones(nbytes, dtype=np.uint8)
    dst = np.ones_like(src)
    best, start = float("inf"), time.perf_counter()
    for k in range(repeats):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t0)
        if k >= 2 and time.perf_counter() - start > budget_s:
            break
    return nbytes / best / 1e9


def memcpy_gbps_of_this_process():
    """`measure_memcpy_gbps` (rounded), measured again only after
    MEMCPY_REUSE_S seconds.  A process that runs sweep after sweep (an API
    loop, a Dask worker, the tests' matrix of a few hundred) would otherwise
    hold every rank for up to a quarter of a second per sweep to measure the
    same host again; a long-lived process still measures afresh as the
    machine's load changes."""
    return _memcpy_in_window(int(time.monotonic() // MEMCPY_REUSE_S))


@functools.lru_cache(maxsize=1)
def _memcpy_in_window(window):
    return round(measure_memcpy_gbps(), 3)


def placement_facts(ranks):
    """Oversubscription from each rank's (host, CPUs it may use).

    Parameters
    ----------
    ranks : list of (host, iterable of CPU ids), one per rank

    Returns
    -------
    dict
        ``ranks_per_host`` and ``cpus_available`` ({host: n}: the CPUs in
        the union of the affinity masks of the job's ranks on that host),
        ``oversubscribed`` (a host has more ranks than those CPUs).
    """
    per_host, cpus = {}, {}
    for host, mask in ranks:
        per_host[host] = per_host.get(host, 0) + 1
        cpus.setdefault(host, set()).update(mask)
    avail = {h: len(cpus[h]) for h in sorted(per_host)}
    counts = {h: per_host[h] for h in sorted(per_host)}
    return {"ranks_per_host": counts, "cpus_available": avail,
            "oversubscribed": any(counts[h] > avail[h] for h in counts)}


def oversubscription_warning(facts):
    """One line for the console, or "" when every rank has a core."""
    if not facts.get("oversubscribed"):
        return ""
    worst = [f"{h}: {n} ranks on {facts['cpus_available'][h]} CPUs"
             for h, n in facts["ranks_per_host"].items() if n > facts["cpus_available"][h]]
    return ("oversubscribed (" + "; ".join(worst) + "): ranks share cores, so the times "
            "measure the scheduler as much as the collective; use no more ranks than cores")


def run_facts(comm, measure_memcpy):
    """Collective over `comm`: the Dataset attrs every rank agrees on.

    Every rank reports its host and CPU mask; with `measure_memcpy` (a
    backend with host buffers: `Backend.host_buffers`) rank 0 measures
    memcpy while the others wait.  Returns (attrs, warning line or "") on
    every rank.
    """
    facts = placement_facts(comm.allgather((socket.gethostname(), sorted(cpus_available()))))
    attrs = dict(facts)
    if comm.Get_rank() == 0 and hasattr(os, "getloadavg"):
        # other work on the host when the run started (it slows the run and its memcpy)
        attrs["load_average"] = round(os.getloadavg()[0], 2)
    if measure_memcpy:
        quiet_barrier(comm)
        if comm.Get_rank() == 0:
            attrs["memcpy_gbps"] = memcpy_gbps_of_this_process()
            attrs["memcpy_method"] = (
                f"numpy.copyto of {MEMCPY_BYTES >> 20} MiB, best of up to {MEMCPY_REPEATS} "
                f"(0.25 s), by rank 0 "
                f"on {socket.gethostname()} before the first size (other ranks waiting; "
                f"sweeps of one process within {MEMCPY_REUSE_S} s share it)")
        quiet_barrier(comm)
    return attrs, oversubscription_warning(facts)
