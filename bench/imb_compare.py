"""The kit's ``mpi`` all_reduce against Intel MPI Benchmarks on the same Open MPI.

    python bench/imb_compare.py build --mirror GITDIR   # IMB-MPI1 into third_party_build/imb
    python bench/imb_compare.py compare [--rounds 2] [--iters 100] [--json OUT]
                                        [--imb PATH] [--columns z3-off,z3-madvise]
    python bench/imb_compare.py table OUT [OUT...]        # the tables again (rounds pooled)

``build`` copies intel/mpi-benchmarks out of a git directory (a clone or a
mirror: ``git --git-dir=GITDIR archive HEAD``) into the git-ignored
``third_party_build/imb`` and builds ``IMB-MPI1`` with ``mpicc``/``mpicxx``;
IMB's Makefile asks for ``-g -O0 -Werror``, which the copy's Makefile turns
into ``-O2`` (Open MPI's C++ headers trip ``-Werror``).  None of IMB's code is
in this repository.

``compare`` runs, in each round, ``IMB-MPI1 Allreduce`` (fp32 sum, 2 ranks,
``-iter N -iter_policy off``) and the kit's ``ccbench run all_reduce
--algorithms mpi`` five ways (``--columns`` picks some), all launched the same way
(`ccbench_kit.launch.mpirun`), in two bands of sizes: 8 B to 1 MiB with
``--small-iters`` iterations (default 1000), 2 to 64 MiB with ``--iters``
(default 100).  The order of the runs turns from round to round.

- ``-z 3 --huge-pages off``: IMB's loop and IMB's memory.  IMB times each
  call alone and then, untimed, runs ``IMB_do_n_barriers(comm, sync)`` with
  ``sync = 1`` by default (src_c/IMB_allreduce.c, IMB_init.c): a barrier
  after every iteration outside its time, which is nccl-tests' and the
  kit's ``-z 3``; ``off`` is libc malloc, as IMB's buffers;
- ``-z 3 --huge-pages madvise``: the same with numpy's huge-page advice
  (the huge-page column);
- ``-z 3 --huge-pages off`` with ``MPI4PY_RC_THREAD_LEVEL=multiple``:
  mpi4py's default thread level, which the kit's ranks no longer ask for
  (IMB calls MPI_Init, which gives MPI_THREAD_SINGLE);
- the same with ``funneled``, the level the kit's ranks asked for before
  (Open MPI locks in every call at any level above SINGLE);
- ``-z 0 --huge-pages off``: the kit's default loop, iterations back to
  back with no barrier (nccl-tests' default).

IMB's ``t_avg`` is each rank's mean time per call averaged over ranks, so
the kit's number is the same statistic (``time("avg", "ranks-avg")``, its
``-a 1``).  Per size it prints the median over rounds of each, the ratios
kit/IMB, and the load average before each run; only ratios taken side by
side mean anything.  ``--imb`` names an ``IMB-MPI1`` built elsewhere (a
device machine builds its own from the carried copy).  The JSON keeps the
host's cores and kernel and, per column, what the kit's runs recorded
(`RUN_FACTS`: their MPI library, cores, THP mode, buffers' pages and
thread level).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

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


#: (first, last) log2 of the size and the iterations of each band: many
#: iterations where a call takes microseconds (IMB's default policy runs 1000
#: there too), fewer where it takes milliseconds
BANDS = ((3, 20), (21, 26))


def host_facts():
    """What the kit's runs do not record of the host, for the JSON and the
    tables' heading (each run records its MPI library, cores and THP mode:
    `RUN_FACTS`)."""
    return {"cores": os.cpu_count(), "kernel": os.uname().release}


def mpirun_stdout(ranks, argv):
    """What `argv` on `ranks` ranks prints, launched as the kit launches its
    own ranks (`ccbench_kit.launch.mpirun`), so that both tools run alike."""
    from ccbench_kit.launch.mpirun import mpirun_command, mpirun_env
    return subprocess.run(mpirun_command(ranks, argv), check=True, capture_output=True,
                          text=True, env=mpirun_env()).stdout


def run_imb(imb, ranks, iters, band):
    out = mpirun_stdout(ranks, [imb, "Allreduce", "-npmin", str(ranks), "-msglog",
                                f"{band[0]}:{band[1]}", "-iter", str(iters), "-iter_policy",
                                "off", "-time", "600", "-mem", "2"])
    times, inside = {}, False
    for line in out.splitlines():
        if line.startswith("# Benchmarking Allreduce"):
            inside = True
        elif inside and line.split() and line.split()[0].isdigit():
            size, _, _, _, t_avg = line.split()[:5]
            if int(size) >= 1 << band[0]:
                times[int(size)] = float(t_avg)
    if not times:
        raise SystemExit(f"no Allreduce table in IMB's output:\n{out}")
    return times


#: what each kit run records of its memory, thread level and host, kept per column
RUN_FACTS = ("buffer_pages", "mpi_thread_level", "library", "cpus_available", "thp_enabled")


def run_kit(ranks, iters, band, huge, blocking, env):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "k.nc")
        cmd = [sys.executable, "-m", "ccbench_kit", "run", "all_reduce",
               "-r", str(ranks), "-b", str(1 << band[0]), "-e", str(1 << band[1]), "-f", "2",
               "-n", str(iters), "-w", "10", "-d", "fp32", "--algorithms", "mpi",
               "--placement", "out_of_place", "--huge-pages", huge, "-z", str(blocking),
               "--non-interactive", "--out", out]
        subprocess.run(cmd, check=True, capture_output=True, text=True,
                       env={**os.environ, **env})
        import ccbench_kit as ccb
        ds = ccb.load(out)
        t = ds.ccb.time("avg", "ranks-avg").sel(algorithm="mpi", placement="out_of_place")
        facts = {k: ds.attrs[k] for k in RUN_FACTS if k in ds.attrs}
        return {int(s): float(t.sel(size=s)) for s in ds["size"].values}, facts


#: (name, column title, --huge-pages, -z, environment): the kit's runs of a round
KIT_RUNS = (
    ("z3-off", "kit -z 3, malloc", "off", 3, {}),
    ("z3-madvise", "kit -z 3, huge pages (madvise)", "madvise", 3, {}),
    ("z3-off-multiple", "kit -z 3, malloc, MPI_THREAD_MULTIPLE", "off", 3,
     {"MPI4PY_RC_THREAD_LEVEL": "multiple"}),
    ("z0-off", "kit -z 0, malloc", "off", 0, {}),
    ("z3-off-funneled", "kit -z 3, malloc, MPI_THREAD_FUNNELED", "off", 3,
     {"MPI4PY_RC_THREAD_LEVEL": "funneled"}),
)


def paired_ratio(imb, kit, draws=4000, seed=27):
    """Median over rounds of kit/IMB taken in the same round, and its 95 %
    bootstrap interval (rounds resampled; seeded, so a table reprints the
    same)."""
    import random
    ratios = [k / i for i, k in zip(imb, kit)]
    rng = random.Random(seed)
    boot = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(draws))
    return statistics.median(ratios), boot[int(0.025 * draws)], boot[int(0.975 * draws) - 1]


def verdict(lo, hi, band=0.05):
    """Within ±band, outside it, or the rounds cannot tell."""
    if 1 - band <= lo and hi <= 1 + band:
        return "within"
    if hi < 1 - band or lo > 1 + band:
        return "outside"
    return "cannot tell"


def print_tables(runs):
    """The medians per size, then kit/IMB per round with its interval."""
    med = {k: {s: statistics.median(run[s] for run in v) for s in v[0]}
           for k, v in runs.items() if v}
    kit_runs = [r for r in KIT_RUNS if r[0] in med]
    sizes = sorted(set(med["imb"]) & set(med["z3-off"]), key=int)
    print("Medians over rounds (us):\n")
    print("| size (B) | IMB t_avg |" + "".join(f" {t} | / IMB |" for _, t, *_ in kit_runs))
    print("|---:|---:|" + "---:|---:|" * len(kit_runs))
    for s in sizes:
        i = med["imb"][s]
        cells = "".join(f" {med[k][s]:.2f} | {med[k][s] / i:.3f} |" for k, *_ in kit_runs)
        print(f"| {s} | {i:.2f} |{cells}")
    print("\nkit -z 3 (malloc) / IMB, the two taken in the same round: median over rounds, "
          "95 % bootstrap interval, against ±5 %; IMB's own spread (interquartile range "
          "over rounds / median):\n")
    print("| size (B) | kit/IMB | 95 % interval | ±5 % | IMB's spread |")
    print("|---:|---:|---:|:---|---:|")
    for s in sizes:
        imb = [r[s] for r in runs["imb"]]
        mid, lo, hi = paired_ratio(imb, [r[s] for r in runs["z3-off"]])
        if len(imb) < 2:
            spread = "–"
        else:
            q = statistics.quantiles(imb, n=4)
            spread = f"{(q[2] - q[0]) / statistics.median(imb):.2f}"
        said = verdict(lo, hi) if len(imb) >= 3 else f"cannot tell ({len(imb)} rounds)"
        print(f"| {s} | {mid:.3f} | {lo:.3f}–{hi:.3f} | {said} | {spread} |")


def compare(args):
    kit_runs = [r for r in KIT_RUNS if r[0] in args.columns]
    runs = {"imb": [], **{name: [] for name, *_ in kit_runs}}
    loads, pages, host = [], {}, host_facts()
    start = time.monotonic()
    for r in range(args.rounds):
        round_start = time.monotonic()
        # the kit's runs in a turning order, IMB's place in it too, so that
        # no column always follows the same neighbour
        order = [("imb",)] + kit_runs
        order = order[r % len(order):] + order[:r % len(order)]
        got = {name: {} for name in runs}
        for band, iters in zip(BANDS, (args.small_iters, args.iters)):
            for run in order:
                loads.append((run[0], r, loadavg()))
                if run[0] == "imb":
                    got["imb"].update(run_imb(args.imb, args.ranks, iters, band))
                else:
                    name, _, huge, blocking, env = run
                    times, facts = run_kit(args.ranks, iters, band, huge, blocking, env)
                    pages.setdefault(name, {}).update(facts)
                    got[name].update(times)
        for name, times in got.items():
            runs[name].append(times)
        if args.json:  # after every round, so a call cut short keeps what it measured
            save(args.json, runs, loads, pages, host)
        took = time.monotonic() - round_start
        if args.seconds and time.monotonic() - start + took > args.seconds:
            print(f"# stopped after {r + 1} rounds: another would pass --seconds {args.seconds}")
            break
    print(f"# {len(runs['imb'])} rounds, {args.small_iters} iterations to {1 << BANDS[0][1]} B, "
          f"{args.iters} above, {args.ranks} ranks; {host}")
    print_tables(runs)
    print("# load average (1, 5, 15 min) before each run: "
          + "; ".join(f"{k} round {r + 1}: {la}" for k, r, la in loads))
    for k, v in pages.items():
        print(f"# kit {k}: {v}")


def merged_runs(paths):
    """The rounds of several saved comparisons as one (the columns all of
    them have); each file's rounds are side by side within themselves."""
    files = []
    for path in paths:
        with open(path) as f:
            files.append(json.load(f)["runs"])
    common = set.intersection(*(set(k for k, v in runs.items() if v) for runs in files))
    return {k: [r for runs in files for r in runs[k]] for k in sorted(common)}


def save(path, runs, loads, pages, host):
    with open(path, "w") as f:
        json.dump({"runs": runs, "loads": loads, "pages": pages, "host": host}, f, indent=1)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--mirror", required=True, help="git directory of intel/mpi-benchmarks")
    c = sub.add_parser("compare")
    c.add_argument("--ranks", type=int, default=2)
    c.add_argument("--iters", type=int, default=100, help="iterations from 2 MiB")
    c.add_argument("--small-iters", type=int, default=1000, help="iterations to 1 MiB")
    c.add_argument("--rounds", type=int, default=2)
    c.add_argument("--seconds", type=float, default=None,
                   help="start no round that would end past this many seconds")
    c.add_argument("--json", default=None)
    c.add_argument("--imb", default=IMB, help="the IMB-MPI1 to run (default: the one build made)")
    names = [name for name, *_ in KIT_RUNS]
    c.add_argument("--columns", type=lambda v: v.split(","), default=names,
                   help="the kit's runs, some of " + ",".join(names) + " (z3-off always)")
    t = sub.add_parser("table", help="the tables of saved --json files, their rounds together")
    t.add_argument("json", nargs="+")
    args = p.parse_args()
    if args.cmd == "build":
        build(args.mirror)
    elif args.cmd == "table":
        print_tables(merged_runs(args.json))
    else:
        unknown = set(args.columns) - set(names)
        if unknown or "z3-off" not in args.columns:
            p.error(f"--columns: some of {','.join(names)}, z3-off among them")
        compare(args)


if __name__ == "__main__":
    main()
