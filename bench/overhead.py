"""Harness overhead, and the kit's `mpi` all_reduce against a plain mpi4py
loop of MPI_Allreduce timed with MPI_Wtime, side by side in one run.

    .venv/bin/python bench/overhead.py [--ranks 2] [--iters 2000] [--reps 7]

Relaunches itself under mpirun when not already an MPI rank. Both sides time
each iteration the same way (MPI_Wtime around one call); they alternate
`reps` times and the medians of the per-repetition means are compared.
"""
import argparse
import os
import subprocess
import sys

import numpy as np


def measure(args):
    from mpi4py import MPI

    from ccbench_kit.backends.mpi import engine
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    _engine = engine()
    overhead = _engine.loop_overhead(comm, 100000)
    rows = []
    for size in (8, 16 << 20):
        n = size // 4
        iters = args.iters if size < 1 << 20 else max(args.iters // 40, 20)
        send = np.ones(n, np.float32)
        recv = np.zeros(n, np.float32)
        kit, plain = [], []
        for _ in range(args.reps):
            comm.Barrier()
            lat, _ = _engine.time_loop(comm, "all_reduce", "mpi", [(send, recv, None)],
                                       dtype=8, op=0, count=n, warmup=5, iters=iters)
            kit.append(comm.allreduce(lat.mean(), op=MPI.MAX))
            for _ in range(5):
                comm.Allreduce(send, recv, op=MPI.SUM)
            comm.Barrier()
            times = np.empty(iters)
            for i in range(iters):
                t0 = MPI.Wtime()
                comm.Allreduce(send, recv, op=MPI.SUM)
                times[i] = MPI.Wtime() - t0
            plain.append(comm.allreduce(times.mean() * 1e6, op=MPI.MAX))
        rows.append((size, iters, float(np.median(kit)), float(np.median(plain))))
    if rank == 0:
        print(f"ranks: {comm.Get_size()}  library: {MPI.Get_library_version().splitlines()[0]}")
        print(f"harness overhead per iteration (no-op collective, {overhead.size} iterations): "
              f"median {np.median(overhead) * 1e3:.1f} ns, mean {overhead.mean() * 1e3:.1f} ns")
        print(f"{'size':>10} {'iters':>6} {'kit mpi (us)':>13} {'mpi4py loop (us)':>17} {'ratio':>7}")
        for size, iters, k, p in rows:
            print(f"{size:>10} {iters:>6} {k:>13.3f} {p:>17.3f} {k / p:>7.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()
    if "OMPI_COMM_WORLD_SIZE" in os.environ:
        return measure(args)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from ccbench_kit.launch.mpirun import mpirun_command, mpirun_env
    cmd = mpirun_command(args.ranks, [sys.executable, os.path.abspath(__file__), *sys.argv[1:]])
    return subprocess.call(cmd, env=mpirun_env())


if __name__ == "__main__":
    sys.exit(main())
