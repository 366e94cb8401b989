"""ccbench's nccl backend against nccl-tests, side by side, on this machine's GPUs.

    python bench/nccl_compare.py compare --nccl-tests DIR --out DIR [-r N] [-b 8 -e 4G ...]
    python bench/nccl_compare.py winners RESULTS.nc
    python bench/nccl_compare.py timing EVENTS.nc BATCH.nc [GRAPH.nc]

`compare` runs, for each collective, nccl-tests' ``<coll>_perf`` (built
elsewhere; DIR holds the binaries) and ``ccbench run --backend nccl
--timing batch`` with the same sizes, warm-up and iterations, one process
per GPU under mpirun on both sides, and writes ``compare.md`` and
``compare.json``: time and busbw per size, the ratio, and the verdicts
(busbw >= 99 % of nccl-tests' from 256 MiB up; the smallest size's time
within +1 µs).  nccl-tests reports the mean over ranks (its ``-a 1``
default), so ours is read with the same rank reduction.

`winners` prints the fastest algorithm per size (and what NCCL ran, from
the ``nccl_ran`` attr); `timing` the per-iteration modes' overhead against
batch timing.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

DEFAULT_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast",
                       "sendrecv")


def _env():
    env = dict(os.environ)
    env.setdefault("NCCL_NVLS_ENABLE", "0")  # never multicast on shared machines
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_nccl_tests(bindir, coll, nranks, a, out, maxbytes=None, tag="", minbytes=None):
    from ccbench_kit.launch.mpirun import mpirun_command
    exe = os.path.join(bindir, f"{coll}_perf")
    js = os.path.join(out, f"nccltests_{coll}{tag}.json")
    argv = [exe, "-b", str(minbytes or a.minbytes), "-e", str(maxbytes or a.maxbytes),
            "-f", str(a.stepfactor), "-w", str(a.warmup), "-n", str(a.iters), "-c", "0", "-g", "1", "-d", a.dtype,
            "-J", js]
    cmd = mpirun_command(nranks, argv)
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=a.timeout)
    with open(os.path.join(out, f"nccltests_{coll}{tag}.log"), "w") as f:
        f.write(" ".join(cmd) + "\n" + p.stdout + p.stderr)
    if p.returncode != 0:
        raise RuntimeError(f"nccl-tests {coll} failed ({p.returncode}):\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    with open(js) as f:
        data = json.load(f)
    return data, time.time() - t0


def run_ours(coll, nranks, a, out, maxbytes=None, tag="", extra=(), minbytes=None):
    nc = os.path.join(out, f"ccbench_{coll}{tag}.nc")
    cmd = [sys.executable, "-m", "ccbench_kit", "run", coll, "-r", str(nranks),
           "-b", str(minbytes or a.minbytes), "-e", str(maxbytes or a.maxbytes),
           "-f", str(a.stepfactor),
           "-w", str(a.warmup), "-n", str(a.iters), "-d", a.dtype, "--backend", "nccl",
           "--algorithms", "nccl", "--timing", a.timing, "--out", nc, "--non-interactive",
           *extra]
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=a.timeout,
                       cwd=ROOT)
    with open(os.path.join(out, f"ccbench_{coll}{tag}.log"), "w") as f:
        f.write(" ".join(cmd) + "\n" + p.stdout + p.stderr)
    if p.returncode != 0:
        raise RuntimeError(f"ccbench {coll} failed ({p.returncode}):\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    return nc, time.time() - t0


def their_rows(data, placement="out_of_place"):
    """{size: (time µs, busbw GB/s)} as nccl-tests printed them."""
    rows = {}
    for r in data["results"]:
        v = r.get(placement) or {}
        if int(r["size"]) > 0 and v.get("time") not in (None, "N/A"):
            rows[int(r["size"])] = (float(v["time"]), float(v["bus_bw"]))
    return rows


def our_rows(nc, placement="out_of_place", algorithm="nccl"):
    from ccbench_kit.dataset import load
    ds = load(nc)
    t = ds.ccb.time("avg", rank_stat="mean").sel(algorithm=algorithm, placement=placement)
    b = ds.ccb.busbw("avg", rank_stat="mean").sel(algorithm=algorithm, placement=placement)
    return {int(s): (float(t.sel(size=s)), float(b.sel(size=s))) for s in ds["size"].values}, ds


SMALL = 1024  # sizes up to this are latency-bound: their median difference is judged


def _small_pairs(theirs, ours):
    return [(s, theirs[s][0], ours[s][0]) for s in sorted(set(theirs) & set(ours)) if s <= SMALL]


def compare_one(theirs, ours, band, threshold, slack, small_pairs=None, band_rounds=None):
    """Rows per common size; busbw verdict over `band`; latency verdict on
    the median difference over the (size, nccl-tests µs, ours µs) pairs of
    sizes <= SMALL, from every round (20 host-timed iterations of ~10 µs
    jitter by several µs on either side, size to size and run to run)."""
    sizes = sorted(set(theirs) & set(ours))
    rows, bw_ok, lat_ok = [], True, None
    for s in sizes:
        (tt, tb), (ot, ob) = theirs[s], ours[s]
        ratio = ob / tb if tb > 0 else float("nan")
        in_band = band[0] <= s <= band[1]
        row = {"size": s, "nccl_tests_us": tt, "ours_us": ot, "dt_us": ot - tt,
               "nccl_tests_busbw": tb, "ours_busbw": ob, "ratio": ratio, "in_band": in_band}
        judged = ratio
        if band_rounds and s in band_rounds:
            # every round's busbw of each tool: the verdict on the medians
            tbs, obs = band_rounds[s]
            judged = row["median_ratio"] = statistics.median(obs) / statistics.median(tbs)
            row["rounds"] = len(tbs)
        if in_band and not judged >= threshold:
            bw_ok = False
        rows.append(row)
    if small_pairs is None:
        small_pairs = _small_pairs(theirs, ours)
    small = sorted(o - t for _, t, o in small_pairs)
    if small:
        mid = len(small) // 2
        med = small[mid] if len(small) % 2 else (small[mid - 1] + small[mid]) / 2
        lat_ok = med <= slack
        for r in rows:
            r["small_median_dt_us"] = med
    return rows, bw_ok, lat_ok


def cmd_compare(a):
    os.makedirs(a.out, exist_ok=True)
    from ccbench_kit.units import parse_size
    band = (parse_size(a.band[0], "--band"), parse_size(a.band[1], "--band"))
    nranks = a.ranks or _gpu_count()
    report = {"nranks": nranks, "args": vars(a), "collectives": {}}
    md = [f"# ccbench (--timing {a.timing}) vs nccl-tests, {nranks} ranks, {a.dtype}, "
          f"-b {a.minbytes} -e {a.maxbytes} -f {a.stepfactor} -w {a.warmup} -n {a.iters}", ""]
    for i, coll in enumerate(a.collectives):
        try:
            # alternate who goes first, so neither side always runs on a warmer machine
            if i % 2 == 0:
                data, t_theirs = run_nccl_tests(a.nccl_tests, coll, nranks, a, a.out)
                nc, t_ours = run_ours(coll, nranks, a, a.out)
            else:
                nc, t_ours = run_ours(coll, nranks, a, a.out)
                data, t_theirs = run_nccl_tests(a.nccl_tests, coll, nranks, a, a.out)
        except (RuntimeError, subprocess.TimeoutExpired, OSError) as e:
            report["collectives"][coll] = {"error": str(e)}
            md += [f"## {coll}", "", f"FAILED: {e}", ""]
            print(f"{coll}: FAILED: {str(e).splitlines()[0]}", flush=True)
            continue
        ours, ds = our_rows(nc)
        theirs = their_rows(data)
        small_pairs = _small_pairs(theirs, ours)
        for k in range(a.latency_repeats):
            # the latency-bound sizes again, the other tool first this time
            tag, mb = f".lat{k + 1}", str(SMALL)
            try:
                if (i + k) % 2 == 0:
                    nc2, _ = run_ours(coll, nranks, a, a.out, mb, tag)
                    d2, _ = run_nccl_tests(a.nccl_tests, coll, nranks, a, a.out, mb, tag)
                else:
                    d2, _ = run_nccl_tests(a.nccl_tests, coll, nranks, a, a.out, mb, tag)
                    nc2, _ = run_ours(coll, nranks, a, a.out, mb, tag)
                small_pairs += _small_pairs(their_rows(d2), our_rows(nc2)[0])
            except (RuntimeError, subprocess.TimeoutExpired, OSError) as e:
                print(f"{coll}: latency repeat {k + 1} failed: {str(e).splitlines()[0]}", flush=True)
        band_rounds = None
        if a.band_repeats:
            # the band's sizes again, the order swapped each round: busbw at one
            # size swings ~1 % run to run on either side, so judge the medians
            band_rounds = {s: ([theirs[s][1]], [ours[s][1]]) for s in set(theirs) & set(ours)
                           if band[0] <= s <= band[1]}
            for k in range(a.band_repeats):
                tag = f".band{k + 1}"
                def theirs_band():
                    return their_rows(run_nccl_tests(a.nccl_tests, coll, nranks, a, a.out,
                                                     a.band[1], tag, a.band[0])[0])

                def ours_band():
                    return our_rows(run_ours(coll, nranks, a, a.out, a.band[1], tag,
                                             minbytes=a.band[0])[0])[0]
                try:
                    if (i + k) % 2:
                        t2, o2 = theirs_band(), ours_band()
                    else:
                        o2 = ours_band()
                        t2 = theirs_band()
                except (RuntimeError, subprocess.TimeoutExpired, OSError) as e:
                    print(f"{coll}: band repeat {k + 1} failed: {str(e).splitlines()[0]}", flush=True)
                    continue
                for s2, (tl, ol) in band_rounds.items():
                    if s2 in t2 and s2 in o2:
                        tl.append(t2[s2][1])
                        ol.append(o2[s2][1])
        rows, bw_ok, lat_ok = compare_one(theirs, ours, band, a.threshold, a.slack, small_pairs,
                                          band_rounds)
        ran = json.loads(ds.attrs.get("nccl_ran", "{}") or "{}").get("nccl", {})
        report["collectives"][coll] = {"rows": rows, "busbw_ok": bw_ok, "latency_ok": lat_ok,
                                       "nccl_ran": ran, "seconds": {"ours": t_ours, "nccl_tests": t_theirs},
                                       "nccl_version": data.get("nccl_version")}
        band_rows = [r for r in rows if r["in_band"]]
        worst = min((r.get("median_ratio", r["ratio"]) for r in band_rows), default=float("nan"))
        med = rows[0].get("small_median_dt_us", float("nan")) if rows else float("nan")
        md += [f"## {coll}: busbw {'PASS' if bw_ok else 'FAIL'} (worst ratio {worst:.4f} in "
               f"{a.band[0]}-{a.band[1]}); latency {'PASS' if lat_ok else 'FAIL'} (median "
               f"difference {med:+.2f} us over sizes <= {SMALL} B in {1 + a.latency_repeats} rounds; "
               f"{rows[0]['dt_us']:+.2f} us at "
               f"{rows[0]['size']} B)" if rows else f"## {coll}: no common sizes",
               "", "| size (B) | nccl-tests time (us) | ours (us) | diff (us) | nccl-tests busbw (GB/s) "
               "| ours busbw (GB/s) | ratio | NCCL ran |", "|---:|---:|---:|---:|---:|---:|---:|---|"]
        for r in rows:
            md.append(f"| {r['size']} | {r['nccl_tests_us']:.2f} | {r['ours_us']:.2f} | "
                      f"{r['dt_us']:+.2f} | {r['nccl_tests_busbw']:.2f} | {r['ours_busbw']:.2f} | "
                      f"{r['ratio']:.4f}{' *' if r['in_band'] else ''}"
                      + (f" (median of {r['rounds']}: {r['median_ratio']:.4f})" if "median_ratio" in r else "")
                      + f" | {ran.get(str(r['size']), '')} |")
        md.append("")
        _write(a.out, md, report)  # after each collective, so a cut-short run keeps what it did
        print(f"{coll}: busbw {'PASS' if bw_ok else 'FAIL'} worst {worst:.4f}; latency "
              f"{'PASS' if lat_ok else 'FAIL'} (median {med:+.2f} us <= {SMALL} B; {rows[0]['size']} B: "
              f"ours {rows[0]['ours_us']:.2f} us vs {rows[0]['nccl_tests_us']:.2f} us); "
              f"took {t_ours:.0f} s vs {t_theirs:.0f} s", flush=True)
    md.append("`*`: inside the band the acceptance compares (busbw ratio >= "
              f"{a.threshold}; with --band-repeats, the ratio of each tool's median over "
              "rounds); times are the mean over ranks of the mean over iterations.")
    _write(a.out, md, report)
    return 0


def _write(out, md, report):
    with open(os.path.join(out, "compare.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    with open(os.path.join(out, "compare.json"), "w") as f:
        json.dump(report, f, indent=1, default=str)


def _gpu_count():
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout
        return max(1, sum(1 for line in out.splitlines() if line.startswith("GPU ")))
    except OSError:
        return 2


def cmd_winners(a):
    from ccbench_kit.dataset import load
    ds = load(a.results)
    t = ds.ccb.time("avg", rank_stat=a.rank_stat).sel(placement="out_of_place")
    b = ds.ccb.busbw("avg", rank_stat=a.rank_stat).sel(placement="out_of_place")
    ran = json.loads(ds.attrs.get("nccl_ran", "{}") or "{}")
    na = json.loads(ds.attrs.get("not_available", "{}") or "{}")
    algs = [str(x) for x in ds["algorithm"].values]
    lines = [f"# {ds.attrs['collective']}, {ds.attrs['nranks']} ranks, timing {ds.attrs['timing']}: "
             "time (us) per algorithm, winner per size (what NCCL ran in brackets)", "",
             "| size (B) | " + " | ".join(algs) + " | winner | busbw (GB/s) |",
             "|---:|" + "---:|" * len(algs) + "---|---:|"]
    for s in ds["size"].values:
        ts = t.sel(size=s)
        cells = []
        for alg in algs:
            v = float(ts.sel(algorithm=alg))
            what = ran.get(alg, {}).get(str(int(s)), "")
            cells.append("n/a" if v != v else f"{v:.2f}" + (f" [{what}]" if what else ""))
        best = ts.fillna(float("inf")).argmin("algorithm").item()
        lines.append(f"| {int(s)} | " + " | ".join(cells) + f" | {algs[best]} | "
                     f"{float(b.sel(size=s, algorithm=algs[best])):.2f} |")
    if na:
        lines += ["", "Not available: " + "; ".join(
            f"{alg}: {len(m)} sizes ({next(iter(m.values()))})" for alg, m in na.items())]
    print("\n".join(lines))
    return 0


def cmd_timing(a):
    from ccbench_kit.dataset import load
    runs = [load(p) for p in a.results]
    base = next((d for d in runs if d.attrs["timing"] == "batch"), None)
    if base is None:
        print("timing: give a --timing batch run", file=sys.stderr)
        return 2
    tb = base.ccb.time("avg", rank_stat="mean").sel(placement="out_of_place").isel(algorithm=0)
    others = [d for d in runs if d is not base]
    lines = ["| size (B) | batch (us) | " + " | ".join(
        f"{d.attrs['timing']}{'' if d.attrs['timing'] != 'graph' else ' -G ' + str(d.attrs.get('graph_launches'))} (us) | overhead"
        for d in others) + " |", "|---:|---:|" + "---:|---:|" * len(others)]
    ts = [d.ccb.time("avg", rank_stat="mean").sel(placement="out_of_place").isel(algorithm=0) for d in others]
    for s in base["size"].values:
        b = float(tb.sel(size=s))
        cells = []
        for t in ts:
            v = float(t.sel(size=s)) if s in t["size"].values else float("nan")
            cells.append(f"{v:.2f} | {v - b:+.2f} us ({(v / b - 1) * 100:+.1f} %)")
        lines.append(f"| {int(s)} | {b:.2f} | " + " | ".join(cells) + " |")
    print("\n".join(lines))
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compare")
    c.add_argument("--nccl-tests", required=True, help="folder with nccl-tests' *_perf binaries")
    c.add_argument("--out", required=True)
    c.add_argument("-r", "--ranks", type=int, default=0, help="default: one per GPU")
    c.add_argument("-b", "--minbytes", default="8")
    c.add_argument("-e", "--maxbytes", default="4G")
    c.add_argument("-f", "--stepfactor", default="2")
    c.add_argument("-w", "--warmup", type=int, default=5)
    c.add_argument("-n", "--iters", type=int, default=20)
    c.add_argument("-d", "--dtype", default="float")
    c.add_argument("--timing", default="batch")
    c.add_argument("--collectives", nargs="+", default=list(DEFAULT_COLLECTIVES))
    c.add_argument("--band", nargs=2, default=["256M", "4G"], help="sizes the busbw ratio is judged on")
    c.add_argument("--threshold", type=float, default=0.99)
    c.add_argument("--slack", type=float, default=1.0, help="µs ours may exceed at the smallest size")
    c.add_argument("--timeout", type=float, default=150, help="seconds for each tool's run")
    c.add_argument("--band-repeats", type=int, default=0,
                   help="extra rounds of the --band sizes, order swapped; the busbw verdict "
                        "then takes each size's median over rounds")
    c.add_argument("--latency-repeats", type=int, default=1,
                   help="extra rounds of sizes <= 1 KiB, order swapped, for the latency verdict")
    c.set_defaults(func=cmd_compare)
    w = sub.add_parser("winners")
    w.add_argument("results")
    w.add_argument("--rank-stat", default="mean")
    w.set_defaults(func=cmd_winners)
    t = sub.add_parser("timing")
    t.add_argument("results", nargs="+")
    t.set_defaults(func=cmd_timing)
    a = p.parse_args(argv)
    return a.func(a)


if __name__ == "__main__":
    sys.exit(main())
