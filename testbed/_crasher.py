"""The crash-at-start fault's watcher: the first rank of each of the next
COUNT jobs that start on a node dies of SIGSEGV as soon as it is seen, as a
rank that crashes in MPI start-up does (sent by PID, from outside the rank:
nothing in the kit's code paths knows of it).

``_crasher.py NAMESPACE COUNT``; prints ``ready`` once it watches.  A rank
is a process that slurmstepd started running one of the kit's modules (its
heartbeat child, forked by the rank, is left alone); after a crash it waits
for that job's processes to be gone before it counts the next one.  It ends
after COUNT crashes, or when the namespace is gone.
"""
import os
import signal
import subprocess
import sys
import time

MARK = b"ccbench_kit."


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def ranks(ns):
    """PIDs of the kit's ranks (children of slurmstepd) in namespace `ns`."""
    out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
    found = []
    for pid in map(int, out.split()):
        if MARK not in _read(f"/proc/{pid}/cmdline"):
            continue
        stat = _read(f"/proc/{pid}/stat").decode(errors="replace")
        ppid = stat.rsplit(")", 1)[-1].split()[1] if ")" in stat else ""
        if _read(f"/proc/{ppid}/comm").strip() == b"slurmstepd":
            found.append(pid)
    return sorted(found)


def main(ns, count):
    print("ready", flush=True)
    sys.stdout.close()
    done = 0
    while done < count and os.path.exists(f"/run/netns/{ns}"):
        found = ranks(ns)
        if not found:
            time.sleep(0.01)
            continue
        try:
            os.kill(found[0], signal.SIGSEGV)
            done += 1
        except ProcessLookupError:
            continue
        while ranks(ns) and os.path.exists(f"/run/netns/{ns}"):  # that job's end
            time.sleep(0.05)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
