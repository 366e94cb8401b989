"""The doctor's measurements through a kit backend (``--backend tcp``,
``mpi``, ``nccl`` or any other registered): the same collective, buffers
and timed loop as ``ccbench run``.

`Timer` holds one `backends.Backend` on a communicator (a pair of nodes, a
node's own ranks, a bisection group) and times one collective of one size
exactly as `harness.Sweep` does: the collective's `layout` and
`engine_vectors`, the backend's `alloc`/`upload` and `time` with the
rank's progress counters.  A pair's sendrecv rate here is therefore the
busbw ``ccbench run sendrecv`` reports between the same two nodes (bus
factor 1: each direction's rate).
"""
import numpy as np

from .. import collectives
from ..backends import backend_class, get_backend, names as backend_names
from ..backends.base import host_placement
from ..dtypes import OPS, get_dtype

# the transport of a plan that names none (`api.make_plan`'s default), and
# of the records of kits that named none: the management network's sockets
# (`backends.tcp`)
TCP = "tcp"
DTYPE = "fp32"  # ``ccbench run``'s default


def job_placement(comm):
    """Every rank's `Placement` on its host among all the ranks of `comm`
    (the job's).  A collective: every rank of `comm` calls it, once, before
    any pair or group is formed."""
    return host_placement(comm)


def transports():
    """Every transport name ``doctor --backend`` takes: the backends'."""
    return tuple(backend_names())


def node_backend(backend_name):
    """The backend a node's own check runs through (`Backend.node_backend`)."""
    return backend_class(backend_name).node_backend or backend_name


def ring_algorithm(backend_name):
    """The algorithm a bisection group's all_reduce runs: a ring, whose
    busbw is its slowest link's rate (`bisect`; `Backend.ring_algorithm`)."""
    cls = backend_class(backend_name)
    return cls.ring_algorithm or cls.default_algorithm


class Timer:
    """One backend on `comm`; `times` gives a collective's per-iteration seconds.

    `world`: the ranks that all make this Timer together (the backend's
    set-up runs collectives over them); `placement`: the rank's
    `backends.base.Placement` decided once on the job's communicator
    (`job_placement`), so that a pair's or a group's backend drives the
    rank's own GPU, not the GPU of its index in the pair."""

    def __init__(self, backend_name, comm, world, placement=None):
        self.comm = comm
        self.backend = get_backend(backend_name, comm, world=world, placement=placement)
        self.dtype = get_dtype(DTYPE)

    def times(self, collective, nbytes, iters, warmup, progress, algorithm=None, check=False):
        """Seconds of each of `iters` calls of `collective` on `nbytes`, the
        slowest rank's (a collective ends when its last rank is done).

        `progress`: the rank's two board counters (entered, left).  `check`:
        every rank puts in its rank + 1 and the all_reduce's sum is checked,
        so a rate is never reported for a wrong result."""
        from mpi4py import MPI  # lazy: importing mpi4py.MPI starts MPI; only where a rank runs
        coll = collectives.get(collective)
        be, dt = self.backend, self.dtype
        n, me = self.comm.Get_size(), self.comm.Get_rank()
        layout = coll.layout(nbytes, dt.itemsize, n)
        alg = algorithm or be.default_algorithm
        send, recv = be.alloc(layout.send_elems, dt), be.alloc(layout.recv_elems, dt)
        be.upload(send, np.full(layout.send_elems, me + 1.0, dtype=dt.storage))
        scratch = be.scratch(coll.name, alg, layout.engine_count, dt, n)
        us, _ = be.time(coll.name, alg, [(send, recv, scratch)], count=layout.engine_count,
                        dtype=dt, op=OPS["sum"], root=0, warmup=warmup, iters=iters,
                        progress=progress, **coll.engine_vectors(me, n, layout))
        if check:
            got = be.download(recv)
            want = n * (n + 1) / 2
            if not (got[0] == got[-1] == want):
                raise RuntimeError(f"the {collective} of {n} ranks gave {got[0]}, {got[-1]}, "
                                   f"not {want}")
        seconds = np.ascontiguousarray(us, dtype=float) / 1e6
        self.comm.Allreduce(MPI.IN_PLACE, seconds, op=MPI.MAX)
        return seconds

    def close(self):
        self.backend.close()
