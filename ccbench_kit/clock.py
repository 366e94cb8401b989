"""A common clock: each rank's MPI_Wtime offset to rank 0, by ping-pong.

For each peer, rank 0 and the peer exchange `rounds` timestamps; the round
with the smallest round trip gives offset = t0 - (t_send + t_recv) / 2
(Cristian's method).  Good to about half the minimum round trip.
"""
import numpy as np

_TAG = 0x4343 + 1


def estimate_offsets(comm, rounds=20):
    """Seconds to add to this rank's MPI_Wtime to get rank 0's clock."""
    from mpi4py import MPI

    rank, size = comm.Get_rank(), comm.Get_size()
    buf = np.zeros(1)
    offset = 0.0
    for peer in range(1, size):
        if rank == 0:
            for _ in range(rounds):
                comm.Recv(buf, source=peer, tag=_TAG)
                buf[0] = MPI.Wtime()
                comm.Send(buf, dest=peer, tag=_TAG)
        elif rank == peer:
            best = np.inf
            for _ in range(rounds):
                t1 = MPI.Wtime()
                comm.Send(buf, dest=0, tag=_TAG)
                comm.Recv(buf, source=0, tag=_TAG)
                t2 = MPI.Wtime()
                if t2 - t1 < best:
                    best, offset = t2 - t1, buf[0] - (t1 + t2) / 2
    return offset
