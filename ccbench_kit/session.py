"""What one job's ranks make once and every part of the job shares.

nccl-tests parses once, initialises once and loops data types × ops × ``-N``
cycles in one process.  A `Session` is the kit's version of that: the
communicators of the replica groups, one backend instance per (backend,
options, groups) — so one NCCL communicator init per job —, the host facts
(cores, the memcpy peak) and the clocks' offsets are made on first use and
kept until the job ends (`close`).  A `harness.Sweep` runs one part in it.

Every method is collective over the session's communicator: every rank of
the job asks for the same things in the same order (every rank runs the
same parts).
"""
from . import hostinfo
from .backends import get_backend
from .clock import estimate_offsets


class Session:
    """The shared state of one job on `comm` (every rank of the job)."""

    def __init__(self, comm):
        self.comm = comm
        self._groups = {}     # groups (tuple of tuples) -> (group index, communicator)
        self._backends = {}   # (name, options, groups) -> Backend
        self._facts = {}      # host_buffers -> (facts, crowded)
        self._clock = None
        self._ranks_per_host = None

    def group(self, groups):
        """(index of this rank's replica group, its communicator); (0, the
        session's communicator) without groups."""
        if not groups:
            return 0, self.comm
        key = tuple(tuple(g) for g in groups)
        if key not in self._groups:
            self._groups[key] = split_groups(self.comm, groups)
        return self._groups[key]

    def backend(self, name, options, groups):
        """The backend `name` with `options` on this rank's group's
        communicator, made once per job; the world's communicator picks
        devices."""
        # options: the backend's frozen dataclass, whose repr lists every field
        key = (name, repr(options), tuple(tuple(g) for g in groups or ()))
        if key not in self._backends:
            _, group_comm = self.group(groups)
            self._backends[key] = get_backend(name, group_comm, options, world=self.comm)
        backend = self._backends[key]
        backend.begin_part()
        return backend

    def facts(self, host_buffers):
        """(attrs, crowded warning or "") of `hostinfo.run_facts`, measured
        once; the warning is given to the first part only (one per job)."""
        if host_buffers in self._facts:
            return self._facts[host_buffers], ""
        facts, crowded = hostinfo.run_facts(self.comm, host_buffers)
        self._facts[host_buffers] = facts
        return facts, crowded

    def clock(self):
        """This rank's `clock.estimate_offsets` to rank 0, measured once."""
        if self._clock is None:
            self._clock = estimate_offsets(self.comm)
        return self._clock

    def ranks_per_host(self):
        from mpi4py import MPI  # lazy: importing mpi4py.MPI starts MPI; only where a rank runs
        if self._ranks_per_host is None:
            shared = self.comm.Split_type(MPI.COMM_TYPE_SHARED)
            self._ranks_per_host = shared.Get_size()
            shared.Free()
        return self._ranks_per_host

    def close(self):
        """Free the backends and the groups' communicators."""
        for backend in self._backends.values():
            backend.close()
        self._backends.clear()
        for _, comm in self._groups.values():
            comm.Free()
        self._groups.clear()


def split_groups(comm, groups):
    """(index of this rank's group, its communicator); (0, comm) for no groups.

    A rank's position in its group's list is its rank in the group."""
    if not groups:
        return 0, comm
    me = comm.Get_rank()
    g = next(i for i, members in enumerate(groups) if me in members)
    return g, comm.Split(color=g, key=groups[g].index(me))
