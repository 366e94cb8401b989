"""Import time and peak memory of a generated NCCL Inspector dump.

    python bench/inspector_scale.py 16 64 256 1024   # dump sizes in MB

Writes one dump per size (2 ranks' files, AllReduce of 8 sizes, records as
the Inspector's writer prints them: tests/data/inspector/make_samples.py),
imports it in a fresh process under ``/usr/bin/time -v``, and prints wall
time and peak RSS (its "Maximum resident set size"; ru_maxrss of the child
where /usr/bin/time is missing).  The importer's progress lines (stderr,
large files) are shown as they come.  Record the machine's load average
beside the numbers.
"""
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "data" / "inspector"))
import make_samples as sample  # noqa: E402

COMM = {"id": "0x1", "name": "bench", "n": 2, "nnodes": 1}
SIZES = [8192 << k for k in range(8)]


def write_dump(folder, megabytes):
    """Two ranks' files of about `megabytes` MB in all."""
    per_rank = megabytes * (1 << 20) // 2
    for rank in range(2):
        with open(Path(folder) / f"node-pid{rank}.log", "w") as f:
            written, sn = 0, 0
            while written < per_rank:
                sn += 1
                msg = SIZES[sn % len(SIZES)]
                line = sample.record(COMM, rank, "node", rank, 0, "coll_perf",
                                     sample.coll("AllReduce", sn, msg, 10 + msg // 8192, 2))
                f.write(line)
                written += len(line)
    return folder


CHILD = """
import sys, time, resource
t = time.perf_counter()
from ccbench_kit import importers
parts = importers.open_any(sys.argv[1])
ds = next(iter(parts.values())) if isinstance(parts, dict) else parts
print(f"{time.perf_counter() - t:.1f} s, peak {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB, "
      f"{ds.sizes['iteration']} iterations x {ds.sizes['size']} sizes x {ds.sizes['rank']} ranks")
"""


def main(sizes):
    print("load average:", open("/proc/loadavg").read().split()[:3])
    for mb in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            write_dump(tmp, mb)
            timer = ["/usr/bin/time", "-v"] if os.path.exists("/usr/bin/time") else []
            out = subprocess.run([*timer, sys.executable, "-c", CHILD, tmp], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            rss = [ln.split(":")[1].strip() for ln in out.stderr.splitlines()
                   if "Maximum resident set size" in ln]
            for ln in out.stderr.splitlines():
                if ln.startswith("importing "):
                    print("  " + ln)
            what = out.stdout.strip() or out.stderr.strip().splitlines()[-1]
            if rss:
                what += f" (/usr/bin/time -v: max RSS {int(rss[0]) >> 10} MiB)"
            print(f"{mb} MB dump: {what}", flush=True)
    print("load average:", open("/proc/loadavg").read().split()[:3])


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [4, 16])
