"""Writes the NCCL Inspector samples in this folder, byte for byte as the
Inspector's writer would (NVIDIA/nccl plugins/profiler/inspector, format
v4.0).  See README.md here for where each field comes from.  Run it from
this folder: ``python make_samples.py``.
"""
import os


def lf(x):
    """json.cc jsonDouble: fprintf("%lf") -- six decimals."""
    return "%f" % x


def bw(coll, msg, nranks, t_us):
    """inspectorComputeOpBw (inspector.cc): traffic / 1e9 / seconds, and the
    nccl-tests bus factor."""
    traffic = msg * nranks if coll in ("AllGather", "ReduceScatter") else msg
    factor = {"AllReduce": 2 * (nranks - 1) / nranks, "AllGather": (nranks - 1) / nranks,
              "ReduceScatter": (nranks - 1) / nranks}.get(coll, 1.0)
    alg = traffic / 1.0e9 / (t_us / 1e6) if t_us else 0.0
    return alg, alg * factor


def record(comm, rank, host, pid, ts, perf_key, perf):
    # inspectorCommInfoDumpColl/P2p: {"header":...,"metadata":...,"coll_perf":...}
    # written compact by json.cc, one record per line (jsonNewline)
    head = ('{"id":"%s","comm_name":"%s","rank":%d,"n_ranks":%d,"nnodes":%d}'
            % (comm["id"], comm["name"], rank, comm["n"], comm["nnodes"]))
    meta = ('{"inspector_output_format_version":"v4.0","git_rev":"","rec_mechanism":'
            '"nccl_profiler_interface","dump_timestamp_us":%d,"hostname":"%s","pid":%d}'
            % (ts, host, pid))
    return '{"header":%s,"metadata":%s,"%s":%s}\n' % (head, meta, perf_key, perf)


def coll(name, sn, msg, t, n, source="kernel_gpu", verbose=""):
    alg, bus = bw(name, msg, n, t)
    return ('{"coll":"%s","coll_sn":%d,"coll_msg_size_bytes":%d,"coll_exec_time_us":%d,'
            '"coll_timing_source":"%s","coll_algobw_gbs":%s,"coll_busbw_gbs":%s%s}'
            % (name, sn, msg, t, source, lf(alg), lf(bus), verbose))


def p2p(name, sn, peer, msg, t):
    alg, bus = bw(name, msg, 2, t)
    return ('{"p2p":"%s","p2p_sn":%d,"p2p_peer":%d,"p2p_msg_size_bytes":%d,"p2p_exec_time_us":%d,'
            '"p2p_timing_source":"kernel_gpu","p2p_algobw_gbs":%s,"p2p_busbw_gbs":%s}'
            % (name, sn, peer, msg, t, lf(alg), lf(bus)))


WORLD = {"id": "0x7f8c496ae9f661", "name": "DP Group 0", "n": 3, "nnodes": 2}
PAIR = {"id": "0xe62dedaa97644a", "name": "unknown", "n": 2, "nnodes": 2}
# (rank in WORLD, host, pid, rank in PAIR or None)
PROCS = [(0, "node-a", 4101, 0), (1, "node-a", 4102, None), (2, "node-b", 5203, 1)]
# all_reduce calls on WORLD: (coll_sn, bytes, µs on ranks 0, 1, 2); a job
# that alternates three sizes, six calls each
_AR_US = {8192: [(41, 44, 39), (40, 42, 45), (43, 40, 41), (44, 41, 40), (39, 43, 42), (42, 40, 44)],
          65536: [(60, 58, 63), (57, 61, 59), (62, 60, 58), (59, 64, 60), (61, 57, 62), (58, 60, 61)],
          1048576: [(402, 398, 410), (395, 405, 401), (399, 401, 396), (404, 400, 398),
                    (397, 403, 405), (401, 396, 400)]}
AR = [(1 + 3 * k + j, msg, _AR_US[msg][k]) for k in range(6) for j, msg in enumerate(_AR_US)]
AG = [(19, 65536, (30, 31, 33)), (20, 65536, (29, 32, 30))]   # per-rank contribution
RS = [(1, 131072, (75, 77)), (2, 131072, (74, 79))]          # per-rank result, PAIR

def write_samples(folder="."):
    """Write one dump per process of PROCS into `folder` (its files are
    named as the Inspector names them: HOST-pidPID.log)."""
    for rank, host, pid, pair_rank in PROCS:
        ts = 1752867229276385 + 1000 * rank
        lines = []
        for sn, msg, times in AR:
            lines.append(record(WORLD, rank, host, pid, ts, "coll_perf",
                                coll("AllReduce", sn, msg, times[rank], 3)))
        for sn, msg, times in AG:
            lines.append(record(WORLD, rank, host, pid, ts, "coll_perf",
                                coll("AllGather", sn, msg, times[rank], 3)))
        if pair_rank is not None:
            for sn, msg, times in RS:
                lines.append(record(PAIR, pair_rank, host, pid, ts, "coll_perf",
                                    coll("ReduceScatter", sn, msg, times[pair_rank], 2)))
            # NCCL_INSPECTOR_ENABLE_P2P=1 (the default) records sends and receives
            lines.append(record(PAIR, pair_rank, host, pid, ts, "p2p_perf",
                                p2p("Send" if pair_rank == 0 else "Recv", 1, 1 - pair_rank, 16384, 12)))
        # All2All: the Inspector has no traffic rule for it and prints bandwidth 0
        lines.append(record(WORLD, rank, host, pid, ts, "coll_perf",
                            '{"coll":"All2All","coll_sn":21,"coll_msg_size_bytes":24576,'
                            '"coll_exec_time_us":35,"coll_timing_source":"kernel_gpu",'
                            '"coll_algobw_gbs":0.000000,"coll_busbw_gbs":0.000000}'))
        with open(os.path.join(folder, f"{host}-pid{pid}.log"), "w") as f:
            f.writelines(lines)


if __name__ == "__main__":  # importing it (the tests do) writes nothing
    write_samples()
