"""The kit's ``mpi`` all_reduce against Intel MPI Benchmarks on the same Open MPI.

    python bench/imb_compare.py build --mirror GITDIR   # IMB-MPI1 into third_party_build/imb
    python bench/imb_compare.py compare [--rounds 2] [--iters 100] [--json OUT]

``build`` copies intel/mpi-benchmarks out of a git directory (a clone or a
mirror: ``git --git-dir=GITDIR archive HEAD``) into the git-ignored
``third_party_build/imb`` and builds ``IMB-MPI1`` with ``mpicc``/``mpicxx``;
IMB's Makefile asks for ``-g -O0 -Werror``, which the copy's Makefile turns
into ``-O2`` (Open MPI's C++ headers trip ``-Werror``).  None of IMB's code is
in this repository.

``compare`` runs, in each round and in this order, ``IMB-MPI1 Allreduce``
(fp32 sum, 2 ranks, ``-msglog 3:26`` = 8 B to 64 MiB, ``-iter N
-iter_policy off``) and the kit's ``ccbench run all_reduce --algorithms mpi``
three ways, all launched the same way (`ccbench_kit.launch.mpirun`):

- ``-z 3 --huge-pages off``: IMB's loop and IMB's memory.  IMB times each
  call alone and then, untimed, runs ``IMB_do_n_barriers(comm, sync)`` with
  ``sync = 1`` by default (src_c/IMB_allreduce.c, IMB_init.c): a barrier
  after every iteration outside its time, which is nccl-tests' and the
  kit's ``-z 3``; ``off`` is libc malloc, as IMB's buffers;
- ``-z 3 --huge-pages madvise``: the same with numpy's huge-page advice
  (the huge-page column);
- ``-z 0 --huge-pages off``: the kit's default loop, iterations back to
  back with no barrier (nccl-tests' default).

IMB's ``t_avg`` is each rank's mean time per call averaged over ranks, so
the kit's number is the same statistic (``time("avg", "ranks-avg")``, its
``-a 1``).  Per size it prints the median over rounds of each, the ratios
kit/IMB, and the load average before each run; only ratios taken side by
side mean anything.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.path.join(ROOT, "third_party_build", "imb")
IMB = os.path.join(BUILD, "IMB-MPI1")


def build(mirror):
    os.makedirs(BUILD, exist_ok=True)
    archive = subprocess.run(["git", f"--git-dir={mirror}", "archive", "HEAD"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", BUILD], input=archive, check=True)
    mk = os.path.join(BUILD, "src_cpp", "Makefile")
    with open(mk) as f:
        text = f.read()
    text = text.replace("-g -O0 -Wall -Wextra -Werror", "-O2 -Wall -Wextra") \
               .replace("-g -O0 -Wall -Werror", "-O2 -Wall")
    with open(mk, "w") as f:
        f.write(text)
    subprocess.run(["make", "-j2", "CC=mpicc", "CXX=mpicxx", "IMB-MPI1"], cwd=BUILD, check=True)
    print(IMB)


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def run_imb(ranks, iters):
    from ccbench_kit.launch.mpirun import mpirun_command, mpirun_env
    cmd = mpirun_command(ranks, [IMB, "Allreduce", "-npmin", str(ranks), "-msglog", "3:26",
                                 "-iter", str(iters), "-iter_policy", "off", "-time", "600",
                                 "-mem", "2"])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=mpirun_env()).stdout
    times, inside = {}, False
    for line in out.splitlines():
        if line.startswith("# Benchmarking Allreduce"):
            inside = True
        elif inside and line.split() and line.split()[0].isdigit():
            size, _, _, _, t_avg = line.split()[:5]
            if int(size):
                times[int(size)] = float(t_avg)
    if not times:
        raise SystemExit(f"no Allreduce table in IMB's output:\n{out}")
    return times


def run_kit(ranks, iters, huge, blocking):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "k.nc")
        cmd = [os.path.join(os.path.dirname(sys.executable), "ccbench"), "run", "all_reduce",
               "-r", str(ranks), "-b", "8", "-e", "64M", "-f", "2", "-n", str(iters), "-w", "10",
               "-d", "fp32", "--algorithms", "mpi", "--placement", "out_of_place",
               "--huge-pages", huge, "-z", str(blocking), "--non-interactive", "--out", out]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        import ccbench_kit as ccb
        ds = ccb.load(out)
        t = ds.ccb.time("avg", "ranks-avg").sel(algorithm="mpi", placement="out_of_place")
        return {int(s): float(t.sel(size=s)) for s in ds["size"].values}, ds.attrs["buffer_pages"]


KIT_RUNS = (("z3-off", "off", 3), ("z3-madvise", "madvise", 3), ("z0-off", "off", 0))


def compare(args):
    runs = {"imb": [], **{name: [] for name, _, _ in KIT_RUNS}}
    loads, pages = [], {}
    for r in range(args.rounds):
        loads.append(("imb", r, loadavg()))
        runs["imb"].append(run_imb(args.ranks, args.iters))
        for name, huge, blocking in KIT_RUNS:
            loads.append((name, r, loadavg()))
            times, pages[name] = run_kit(args.ranks, args.iters, huge, blocking)
            runs[name].append(times)
    med = {k: {s: statistics.median(run[s] for run in v) for s in v[0]} for k, v in runs.items()}
    sizes = sorted(set(med["imb"]) & set(med["z3-off"]))
    print(f"# {args.rounds} rounds, {args.iters} iterations, {args.ranks} ranks; medians (us)")
    print("| size (B) | IMB t_avg | kit -z 3, malloc | / IMB | kit -z 3, huge pages (madvise) "
          "| / IMB | kit -z 0, malloc | / IMB |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for s in sizes:
        i = med["imb"][s]
        cells = "".join(f" {med[k][s]:.2f} | {med[k][s] / i:.3f} |" for k, _, _ in KIT_RUNS)
        print(f"| {s} | {i:.2f} |{cells}")
    print("# load average (1, 5, 15 min) before each run: "
          + "; ".join(f"{k} round {r + 1}: {la}" for k, r, la in loads))
    for k, v in pages.items():
        print(f"# kit {k}: {v}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": runs, "loads": loads, "pages": pages}, f, indent=1)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--mirror", required=True, help="git directory of intel/mpi-benchmarks")
    c = sub.add_parser("compare")
    c.add_argument("--ranks", type=int, default=2)
    c.add_argument("--iters", type=int, default=100)
    c.add_argument("--rounds", type=int, default=2)
    c.add_argument("--json", default=None)
    args = p.parse_args()
    if args.cmd == "build":
        build(args.mirror)
    else:
        compare(args)


if __name__ == "__main__":
    main()
