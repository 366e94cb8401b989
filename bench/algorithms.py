"""The kit's own algorithms against the MPI library and against their α-β cost.

    python bench/algorithms.py                 # 2 ranks: (a), (b), (c)
    python bench/algorithms.py -r 8 --no-ring  # 8 ranks: (b), (c) only

Started outside MPI, it runs itself under ``mpirun -np R`` (Open MPI, as
``ccbench run`` does).  One run measures, side by side:

(a) ring all_reduce against MPI_Allreduce, fp32, 16-256 MiB (2 ranks): busbw
    of both, their ratio, and the ring's busbw against the memcpy rate of
    the same size (one rank copying alone, and every rank copying at once),
    in interleaved rounds (median of each), so that other load on the
    machine disturbs all of them alike;
(b) α and β from a ping-pong between ranks 0 and 1 (α: 8 B; β: the slope
    over the top decade of sizes, up to the largest size of the table), γ
    from the engine's own fp32 sum at that size; then every own algorithm at
    the largest size against its α-β-γ
    prediction (`ccbench_kit.theory.predict_time`, the costs of docs/theory.md);
(c) a table algorithm × size × busbw, with the ratio to ``mpi`` and the
    prediction.

Times are the average over iterations of the slowest rank's time (the
harness's statistic); busbw = size / time × the collective's bus factor.
Prints Markdown for bench/RESULTS.md; ``--json`` saves the numbers.
"""
import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time

import numpy as np

MiB = 1 << 20
SIZES = [1 << 10, 64 << 10, 1 * MiB, 16 * MiB, 64 * MiB]
RING_SIZES = [16 * MiB, 32 * MiB, 64 * MiB, 128 * MiB, 256 * MiB]


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-r", "--ranks", type=int, default=2)
    ap.add_argument("--sizes", default=",".join(str(s) for s in SIZES),
                    help="bytes, comma-separated, for (b) and (c); the last is 'largest'")
    ap.add_argument("--ring-sizes", default=",".join(str(s) for s in RING_SIZES))
    ap.add_argument("--no-ring", action="store_true", help="skip (a)")
    ap.add_argument("--rounds", type=int, default=5, help="(a): interleaved rounds per size")
    ap.add_argument("--table-rounds", type=int, default=3,
                    help="(c): interleaved rounds per size and placement")
    ap.add_argument("--collectives", default="", help="comma-separated; default all; none: (a) only")
    ap.add_argument("--dtype", default="fp32")
    ap.add_argument("--json", default="", help="also write the numbers here")
    return ap.parse_args()


def inside_mpi():
    return any(k in os.environ for k in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"))


def relaunch(args):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from ccbench_kit.launch.mpirun import mpirun_command, mpirun_env
    cmd = mpirun_command(args.ranks, [sys.executable, os.path.abspath(__file__), *sys.argv[1:]])
    env = mpirun_env()
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    print("# " + " ".join(cmd), flush=True)
    print("# OMPI_MCA_btl_vader_single_copy_mechanism="
          + env.get("OMPI_MCA_btl_vader_single_copy_mechanism", "(Open MPI's default)"), flush=True)
    return subprocess.call(cmd, env=env)


# -- measurement helpers (every rank) ----------------------------------------

class Bench:
    def __init__(self, comm):
        from ccbench_kit import _engine
        self.E, self.comm = _engine, comm
        self.rank, self.p = comm.Get_rank(), comm.Get_size()

    def iters_for(self, nbytes):
        return int(min(200, max(5, 2e8 / max(nbytes, 1))))

    def time(self, coll, alg, send, recv, count, dtype, *, vectors=None, root=0, iters=None):
        """Seconds per call: mean over iterations of the max over ranks."""
        E = self.E
        sb = E.scratch_bytes(coll, alg, count, dtype.itemsize, self.p)
        scratch = np.zeros(sb, np.uint8) if sb else None
        n = iters or self.iters_for(send.nbytes + recv.nbytes)
        lat, _ = E.time_loop(self.comm, coll, alg, [(send, recv, scratch)], dtype=dtype.engine,
                             op=0, count=count, root=root, warmup=max(2, n // 10), iters=n,
                             **(vectors or {}))
        per_iter = np.max(np.array(self.comm.allgather(lat)), axis=0)
        return float(np.mean(per_iter)) / 1e6

    def memcpy_rate(self, nbytes=64 * MiB, together=False, reps=5):
        """Bytes copied per second by one rank (others idle), or per rank with
        every rank copying at once (`together`); the best of `reps`."""
        a = np.ones(nbytes, np.uint8)
        b = np.empty_like(a)
        np.copyto(b, a)
        best = math.inf
        for _ in range(reps):
            self.comm.Barrier()
            t0 = time.perf_counter()
            if together or self.rank == 0:
                np.copyto(b, a)
            best = min(best, time.perf_counter() - t0)
        rate = nbytes / best
        return self.comm.bcast(rate if self.rank == 0 else None)

    def ping_pong(self, sizes, exchange=False):
        """Seconds per message between ranks 0 and 1 (others wait) per size:
        half a round trip, or (`exchange`) one MPI_Sendrecv with both ranks
        sending at once, as they do inside the collectives."""
        from mpi4py import MPI
        out = []
        for n in sizes:
            buf = np.ones(max(n, 1), np.uint8)[:n]
            other = np.ones(max(n, 1), np.uint8)[:n]
            reps = int(min(1000, max(10, 5e8 / max(n, 1))))
            best = math.inf
            for _ in range(3):
                self.comm.Barrier()
                t0 = MPI.Wtime()
                for _ in range(reps):
                    if self.rank < 2 and exchange:
                        self.comm.Sendrecv(buf, 1 - self.rank, 7, other, 1 - self.rank, 7)
                    elif self.rank == 0:
                        self.comm.Send(buf, 1, 7)
                        self.comm.Recv(buf, 1, 7)
                    elif self.rank == 1:
                        self.comm.Recv(buf, 0, 7)
                        self.comm.Send(buf, 0, 7)
                best = min(best, (MPI.Wtime() - t0) / reps / (1 if exchange else 2))
            out.append(self.comm.bcast(best if self.rank == 0 else None))
        return out

    def gamma(self, dtype, nbytes):
        """Seconds per byte of the engine's own reduction (out = a + b, all
        three `nbytes` long, so from memory at large sizes)."""
        n = nbytes // dtype.itemsize
        a = np.ones(n, dtype.storage)
        b = np.ones(n, dtype.storage)
        out = np.ones(n, dtype.storage)
        best = math.inf
        for _ in range(5):
            t0 = time.perf_counter()
            self.E.reduce_local(a, b, dtype.engine, 0, out=out)
            best = min(best, time.perf_counter() - t0)
        return self.comm.bcast(best / nbytes if self.rank == 0 else None)


def fit_alpha_beta(sizes, times):
    """α: the smallest-size one-way time; β: least-squares slope (relative
    error) over the top decade of sizes, the regime of the largest messages
    (docs/theory.md: fit B away from the latency regime, piecewise where the
    regime changes; here, where messages outgrow the caches)."""
    sizes, times = np.asarray(sizes, float), np.asarray(times, float)
    big = sizes >= sizes.max() / 10
    A = np.vstack([np.ones(big.sum()), sizes[big]]).T
    (_, beta), *_ = np.linalg.lstsq(A / times[big, None], times[big] / times[big], rcond=None)
    return float(times[0]), float(beta)


# -- the run ------------------------------------------------------------------

def buffers(coll, size, dtype, p, rank):
    lay = coll.layout(size, dtype.itemsize, p)
    rng = np.random.default_rng(rank)
    send = dtype.from_float(rng.uniform(0.5, 1.5, lay.send_elems))
    recv = np.zeros(lay.recv_elems, dtype.storage)
    return lay, send, recv


def main():
    args = parse()
    if not inside_mpi():
        return relaunch(args)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from mpi4py import MPI
    from ccbench_kit import collectives, theory
    from ccbench_kit.dtypes import get_dtype

    comm = MPI.COMM_WORLD
    b = Bench(comm)
    p, rank = b.p, b.rank
    dt = get_dtype(args.dtype)
    say = (lambda *a: print(*a, flush=True)) if rank == 0 else (lambda *a: None)
    res = {"machine": platform.node(), "cpu": _cpu(), "ranks": p, "library": MPI.Get_library_version().splitlines()[0],
           "single_copy": os.environ.get("OMPI_MCA_btl_vader_single_copy_mechanism", "default")}
    say(f"# {res['library']} on {res['cpu']}, {p} ranks, {os.cpu_count()} CPUs, "
        f"single-copy mechanism: {res['single_copy']}")

    mc1, mcp = b.memcpy_rate(), b.memcpy_rate(together=True)
    res["memcpy_GBps"] = {"one_rank": mc1 / 1e9, "all_ranks_each": mcp / 1e9}
    say(f"# memcpy 64 MiB: {mc1 / 1e9:.2f} GB/s one rank alone, {mcp / 1e9:.2f} GB/s per rank "
        "with every rank copying")

    # (a) ring vs MPI_Allreduce
    if not args.no_ring:
        coll = collectives.get("all_reduce")
        say("\n(a) all_reduce fp32, ring vs MPI_Allreduce (busbw GB/s)\n")
        say("| size | ring | mpi | ring / mpi | memcpy GB/s (alone / all ranks) | ring / memcpy (alone) "
            "| ring / memcpy (all ranks) |")
        say("|---|---|---|---|---|---|---|")
        res["ring"] = []
        for s in (int(x) for x in args.ring_sizes.split(",")):
            lay, send, recv = buffers(coll, s, dt, p, rank)
            # interleaved rounds, median of each: other jobs on the machine
            # disturb both alike
            rounds = {"ring": [], "mpi": [], "alone": [], "together": []}
            for _ in range(args.rounds):
                for a in ("ring", "mpi"):
                    rounds[a].append(b.time(coll.name, a, send, recv, lay.engine_count, dt,
                                            iters=max(3, b.iters_for(2 * s) // args.rounds)))
                rounds["alone"].append(b.memcpy_rate(s, reps=2))
                rounds["together"].append(b.memcpy_rate(s, together=True, reps=2))
            t = {a: float(np.median(rounds[a])) for a in ("ring", "mpi")}
            bw = {a: lay.size / v * coll.bus_factor(p) / 1e9 for a, v in t.items()}
            m1, mp = (float(np.median(rounds[k])) for k in ("alone", "together"))
            res["ring"].append({"size": lay.size, **{f"{a}_busbw": v for a, v in bw.items()},
                                "memcpy_alone": m1 / 1e9, "memcpy_together": mp / 1e9})
            say(f"| {lay.size >> 20} MiB | {bw['ring']:.2f} | {bw['mpi']:.2f} | "
                f"{bw['ring'] / bw['mpi']:.2f} | {m1 / 1e9:.2f} / {mp / 1e9:.2f} | "
                f"{bw['ring'] * 1e9 / m1:.2f} | {bw['ring'] * 1e9 / mp:.2f} |")
            del send, recv

    # (b) α, β, γ
    if p < 2 or args.collectives == "none":
        return 0
    sizes = [int(x) for x in args.sizes.split(",")]
    top = max(sizes)
    pp_sizes = sorted({8, 64, 512, 4 << 10, 64 << 10, 1 * MiB, top // 8, top // 4, top // 2, top})
    one_way = b.ping_pong(pp_sizes)
    both_ways = b.ping_pong(pp_sizes, exchange=True)
    alpha, beta1 = fit_alpha_beta(pp_sizes, one_way)
    _, beta = fit_alpha_beta(pp_sizes, both_ways)
    gamma = b.gamma(dt, top)
    res.update(alpha=alpha, beta=beta, beta_one_way=beta1, gamma=gamma,
               ping_pong=dict(zip(pp_sizes, one_way)), exchange=dict(zip(pp_sizes, both_ways)))
    say(f"\n(b) ping-pong rank 0 <-> 1: α = {alpha * 1e6:.2f} µs (8 B, one way); β = "
        f"1/({1e-9 / beta:.2f} GB/s) with both ranks sending at once (MPI_Sendrecv), as in the "
        f"collectives (one way alone: 1/({1e-9 / beta1:.2f} GB/s)); slopes over "
        f"{_size(top // 10)}-{_size(top)}; γ (engine's {dt.name} sum, out = a + b, "
        f"{_size(top)}) = 1/({1e-9 / gamma:.2f} GB/s)")
    say("# one way / exchange µs: " + ", ".join(f"{_size(s)} {t * 1e6:.1f}/{u * 1e6:.1f}"
                                                for s, t, u in zip(pp_sizes, one_way, both_ways)))

    names = [n for n in (args.collectives.split(",") if args.collectives else collectives.NAMES)]
    rows = []
    for name in names:
        coll = collectives.get(name)
        algs = b.E.algorithms(coll.name)
        for s in sizes:
            try:
                lay, send, recv = buffers(coll, s, dt, p, rank)
            except Exception:
                continue
            vec = coll.engine_vectors(rank, p, lay)
            root = p - 1 if coll.rooted else 0
            def timed(sbuf, rbuf):  # median of interleaved rounds, as in (a)
                got = {a: [] for a in algs}
                for _ in range(args.table_rounds):
                    for a in algs:
                        got[a].append(b.time(coll.name, a, sbuf, rbuf, lay.engine_count, dt,
                                             vectors=vec, root=root,
                                             iters=max(3, b.iters_for(sbuf.nbytes + rbuf.nbytes)
                                                       // args.table_rounds)))
                return {a: float(np.median(v)) for a, v in got.items()}

            times, inplace = timed(send, recv), {}
            if s == max(sizes) and "in_place" in coll.placements:
                isend, irecv = coll.inplace_buffers(lambda k, d: np.zeros(k, d.storage), dt, rank, lay)
                isend[...] = send[:isend.size]
                inplace = timed(isend, irecv)
                del isend, irecv
            for a in algs:
                bw = lay.size / times[a] * coll.bus_factor(p) / 1e9
                bw_ip = lay.size / inplace[a] * coll.bus_factor(p) / 1e9 if a in inplace else None
                pred = None
                if a != "mpi":
                    tp = theory.predict_time(coll.name, a, lay.size, p, alpha, beta,
                                             gamma if coll.reduces else 0.0,
                                             segment_bytes=256 << 10)
                    pred = lay.size / tp * coll.bus_factor(p) / 1e9 if tp > 0 else None
                rows.append({"collective": coll.name, "algorithm": a, "size": lay.size,
                             "time_us": times[a] * 1e6, "busbw": bw, "busbw_in_place": bw_ip,
                             "vs_mpi": times["mpi"] / times[a], "predicted_busbw": pred})
            del send, recv
    res["table"] = rows

    say("\n(c) busbw (GB/s) by algorithm and size, out-of-place, with the ratio to mpi in "
        "parentheses (mpi time / this time); at the largest size also in place, the α-β-γ "
        "prediction, and measured / predicted for the better placement (out-of-place adds local "
        "copies the model leaves out: the own block, the root's buffer)\n")
    by_alg = {}
    for r in rows:
        by_alg.setdefault((r["collective"], r["algorithm"]), {})[r["size"]] = r
    all_sizes = sorted({r["size"] for r in rows if r["collective"] != "hypercube"})
    say("| collective | algorithm | " + " | ".join(_size(x) for x in all_sizes)
        + " | in place | predicted | measured / predicted |")
    say("|---|---|" + "---|" * (len(all_sizes) + 3))
    short = []
    for (c, a), per in by_alg.items():
        top = per[max(per)]
        cell = lambda r: f"{r['busbw']:.3g} ({r['vs_mpi']:.2f}×)"  # noqa: E731
        cells = [cell(per[x]) if x in per else "" for x in all_sizes]
        if c == "hypercube":  # its size is count × (p - 1): other columns
            cells = [f"{cell(per[x])} at {_size(x)}" for x in sorted(per)][-len(all_sizes):]
            cells = [""] * (len(all_sizes) - len(cells)) + cells
        ip, pred = top["busbw_in_place"], top["predicted_busbw"]
        frac = max(top["busbw"], ip or 0) / pred if pred else None
        if frac is not None and frac < 0.7:
            short.append(f"{c}/{a} {frac:.2f}")
        say(f"| {c} | {a} | " + " | ".join(cells) + f" | {'' if ip is None else f'{ip:.3g}'} | "
            f"{'' if pred is None else f'{pred:.3g}'} | {'' if frac is None else f'{frac:.2f}'} |")
    say(f"\nBelow 70 % of the prediction at the largest size: {', '.join(short) or 'none'}")
    if args.json and rank == 0:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1, default=float)
    return 0


def _size(n):
    for unit, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << k:
            return f"{n / (1 << k):g} {unit}"
    return f"{n} B"


def _cpu():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    sys.exit(main())
