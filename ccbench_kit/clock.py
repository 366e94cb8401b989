"""A common clock: each rank's MPI_Wtime offset to rank 0, by ping-pong.

MPI_Wtime is not synchronised across processes (Open MPI counts from each
process's MPI_Init; other hosts have other clocks), so per-rank start times
are only comparable after each is moved onto one clock, rank 0's.

Rank 0 serves one peer at a time.  The peer sends a ping at t1 (its clock),
rank 0 answers with its clock T, the answer arrives at t2.  If the two
legs take equal time, rank 0 read T at the peer's (t1 + t2) / 2, so
offset = T - (t1 + t2) / 2 (Cristian's method).  An unequal split of the
round trip errs by at most half of it, so the round with the shortest round
trip is kept and half of it is the error bound.  The first rounds are warm-
up (connection set-up, page faults).  Ranks wait for their turn without
spinning, so that on an oversubscribed node the measuring pair gets the
cores.
"""
from typing import NamedTuple

import numpy as np

from .mpi_env import quiet_barrier, wait_quietly

_TAG = 0x4343 + 1
WARMUP_ROUNDS = 3


class ClockOffset(NamedTuple):
    """This rank's clock relative to rank 0's.

    Attributes
    ----------
    offset : float
        Seconds to add to this rank's clock to read rank 0's.
    error : float
        Bound on `offset`'s error in seconds: half the best round trip.
    """

    offset: float
    error: float


def estimate_offsets(comm, rounds=30, clock=None):
    """This rank's `ClockOffset` to rank 0 of `comm`; collective.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
    rounds : int
        Measured ping-pongs per peer (after `WARMUP_ROUNDS` not used).
    clock : callable, optional
        Seconds, as ``MPI.Wtime`` (the default) gives them; tests pass a
        skewed clock to check that the skew is found.
    """
    from mpi4py import MPI  # lazy: importing mpi4py.MPI starts MPI; only where a rank runs

    clock = clock or MPI.Wtime
    rank, size = comm.Get_rank(), comm.Get_size()
    buf = np.zeros(1)
    go = np.zeros(1)
    if rank == 0:
        for peer in range(1, size):
            comm.Send(go, dest=peer, tag=_TAG)  # your turn
            for _ in range(WARMUP_ROUNDS + rounds):
                comm.Recv(buf, source=peer, tag=_TAG)
                buf[0] = clock()
                comm.Send(buf, dest=peer, tag=_TAG)
        result = ClockOffset(0.0, 0.0)
    else:
        wait_quietly(comm.Irecv(go, source=0, tag=_TAG))
        best, offset = np.inf, 0.0
        for i in range(WARMUP_ROUNDS + rounds):
            t1 = clock()
            comm.Send(buf, dest=0, tag=_TAG)
            comm.Recv(buf, source=0, tag=_TAG)
            t2 = clock()
            if i >= WARMUP_ROUNDS and t2 - t1 < best:
                best, offset = t2 - t1, buf[0] - (t1 + t2) / 2
        result = ClockOffset(float(offset), float(best / 2))
    quiet_barrier(comm)
    return result
