"""Small-message latency: nccl-tests against variants of `ccbench run
--backend nccl --timing batch`, side by side, several rounds in rotating
order, on this machine's GPUs.

    python bench/nccl_small_sizes.py --nccl-tests DIR --out DIR \\
        --variant default= --variant ckpt="--checkpoint-every 60" [--rounds 3]

Each variant is ccbench's usual command plus the extra arguments given.
Prints, per collective and variant, the median over sizes (-b to -e) and
rounds of (variant - nccl-tests) in µs, the median and lowest busbw ratio
to nccl-tests' (its median over rounds) and the median SM clock NVML saw
while each tool ran (sampled every millisecond, when nvidia-ml-py is there).
"""
import argparse
import json
import os
import shlex
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nccl_compare import our_rows, run_nccl_tests, run_ours, their_rows  # noqa: E402


class ClockSampler:
    """SM clocks of every GPU, sampled on a thread: (monotonic s, [MHz...])."""

    def __init__(self, period=0.001):
        self.samples, self.period = [], period
        self._stop = threading.Event()
        try:
            import pynvml
            pynvml.nvmlInit()
            n = pynvml.nvmlDeviceGetCount()
            self._h = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
            self._clock = lambda h: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)
        except Exception as e:  # no NVML: run without clocks
            print(f"no clock sampling: {e}", flush=True)
            self._h = []
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.samples.append((time.monotonic(), [self._clock(h) for h in self._h]))
            time.sleep(self.period)

    def __enter__(self):
        if self._h:
            self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()

    def median_between(self, t0, t1):
        v = [min(c) for t, c in self.samples if t0 <= t <= t1 and c]
        return statistics.median(v) if v else float("nan")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nccl-tests", required=True, help="folder with nccl-tests' *_perf binaries")
    p.add_argument("--out", required=True)
    p.add_argument("-r", "--ranks", type=int, default=2)
    p.add_argument("-b", "--minbytes", default="8")
    p.add_argument("-e", "--maxbytes", default="1K")
    p.add_argument("-f", "--stepfactor", default="2")
    p.add_argument("-w", "--warmup", type=int, default=5)
    p.add_argument("-n", "--iters", type=int, default=20)
    p.add_argument("-d", "--dtype", default="float")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--timeout", type=float, default=120)
    p.add_argument("--collectives", nargs="+",
                   default=["alltoall", "broadcast", "sendrecv", "all_gather", "all_reduce"])
    p.add_argument("--variant", action="append", default=[], metavar="NAME=ARGS",
                   help="ccbench with these extra arguments (repeatable)")
    a = p.parse_args(argv)
    a.timing = "batch"
    variants = [(v.split("=", 1)[0], shlex.split(v.split("=", 1)[1])) for v in a.variant or ["default="]]
    os.makedirs(a.out, exist_ok=True)
    tools = ["nccl-tests"] + [name for name, _ in variants]
    res = {c: {t: [] for t in tools} for c in a.collectives}  # [(size, µs, clock)]
    with ClockSampler() as clocks:
        for c in a.collectives:
            for k in range(a.rounds):
                order = tools[k % len(tools):] + tools[:k % len(tools)]
                for tool in order:
                    tag = f".{tool}.{k}"
                    t0 = time.monotonic()
                    try:
                        if tool == "nccl-tests":
                            rows = their_rows(run_nccl_tests(a.nccl_tests, c, a.ranks, a, a.out, tag=tag)[0])
                        else:
                            extra = dict(variants)[tool]
                            rows = our_rows(run_ours(c, a.ranks, a, a.out, tag=tag, extra=extra)[0])[0]
                    except Exception as e:
                        print(f"{c} {tool} round {k}: FAILED {str(e).splitlines()[0]}", flush=True)
                        continue
                    mhz = clocks.median_between(t0, time.monotonic())
                    res[c][tool] += [(s, v[0], mhz, v[1]) for s, v in rows.items()]
            line = [f"{c}:"]
            base, bbw = {}, {}
            for s, v, _, bw in res[c]["nccl-tests"]:
                base.setdefault(s, []).append(v)
                bbw.setdefault(s, []).append(bw)
            base = {s: statistics.median(v) for s, v in base.items()}
            bbw = {s: statistics.median(v) for s, v in bbw.items()}
            nan = float("nan")
            for tool in tools:
                rows = res[c][tool]
                d = [v - base[s] for s, v, *_ in rows if s in base]
                ratio = [bw / bbw[s] for s, _, _, bw in rows if bbw.get(s)]
                med = statistics.median([v for _, v, *_ in rows]) if rows else nan
                mhz = statistics.median([m for _, _, m, _ in rows]) if rows else nan
                line.append(f"{tool} median {med:.2f} us ({statistics.median(d) if d else nan:+.2f} "
                            f"vs nccl-tests; busbw ratio median {statistics.median(ratio) if ratio else nan:.4f}, "
                            f"min {min(ratio) if ratio else nan:.4f}; SM clock {mhz:.0f} MHz)")
            print("  ".join(line), flush=True)
    with open(os.path.join(a.out, "small_sizes.json"), "w") as f:
        json.dump({"args": vars(a), "results": res}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
