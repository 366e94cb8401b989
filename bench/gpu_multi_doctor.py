"""The doctor on several GPUs of one host (issue 24), in one go.

    python bench/gpu_multi_doctor.py --out OUTDIR [--work DIR] [--runs 5] [--size 256M]

1. clean machine: ``ccbench doctor --local --per-gpu`` (every GPU a node, the pairs
   of GPUs and the host's all_reduce over all of them, through nccl), then
   ``ccbench run all_reduce --backend nccl -r NGPU`` of the same size on
   the same GPUs, then the doctor again (expect ``verdict: none`` twice
   and the host all_reduce's busbw within 5 % of ``ccbench run``'s);
2. `runs` times: `testbed.gpu_load` loops a bf16 matmul on a GPU chosen at
   random, and ``ccbench doctor --local --per-gpu`` runs the GPU local
   checks and then the nccl probes, one verdict for both: it should name
   that GPU and no other.

Writes OUTDIR/summary.md and OUTDIR/summary.json; the runs' outputs and
results files go to --work (the wrapper packs them).
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def ccbench(name, work, *args, timeout=180):
    """Run ``python -m ccbench_kit ARGS``; (exit, verdict line, seconds, output)."""
    t0 = time.time()
    try:
        p = subprocess.run([sys.executable, "-m", "ccbench_kit", *args], capture_output=True,
                           text=True, cwd=ROOT, timeout=timeout)
        code, text = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        code, text = 124, f"{e.stdout or ''}{e.stderr or ''}\ntimed out after {timeout} s"
    with open(os.path.join(work, f"{name}.log"), "w") as f:
        f.write(text if isinstance(text, str) else text.decode())
    lines = [ln for ln in str(text).splitlines() if ln.startswith("verdict:")]
    return code, (lines[-1] if lines else ""), round(time.time() - t0, 1), str(text)


def host_busbw(text):
    """The doctor's note: host all_reduce busbw (GB/s, median of repeats)."""
    m = re.search(r"host all_reduce of (\d+) GPUs, (\d+) B: busbw ([\d.]+) GB/s", text)
    return float(m.group(3)) if m else None


def run_busbw(path):
    """``ccbench run``'s busbw (GB/s) of its one size: median and avg."""
    from ccbench_kit.dataset import load
    ds = load(path)
    return {stat: round(float(ds.ccb.busbw(stat).max()), 2) for stat in ("median", "avg")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", default=None)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--size", default="256M")
    a = ap.parse_args()
    work = a.work or a.out
    os.makedirs(a.out, exist_ok=True)
    os.makedirs(work, exist_ok=True)
    from ccbench_kit.backends.nccl import visible_gpus
    from testbed.gpu_load import competing_load
    ngpu = visible_gpus()[0]
    doctor = ["doctor", "--local", "--per-gpu", "--bw-size", a.size, "--bw-iters", "10",
              "--repeats", "5"]
    summary = {"ngpu": ngpu, "size": a.size, "clean": [], "loaded": []}

    def record(where, name, *args, **extra):
        code, line, secs, text = ccbench(name, work, *args)
        row = {"name": name, "exit": code, "verdict": line, "seconds": secs,
               "loadavg": loadavg(), **extra}
        if "--per-gpu" in args:
            row["host_busbw_gbps"] = host_busbw(text)
            for part in ("GPU checks", "nccl pairs"):
                found = re.findall(rf"^{part}: (verdict: .*)$", text, re.M)
                row[part] = found[-1] if found else ""
        where.append(row)
        print(json.dumps(row), flush=True)
        with open(os.path.join(a.out, "summary.json"), "w") as f:  # kept if the call is cut
            json.dump(summary, f, indent=1)
        return row

    record(summary["clean"], "clean_doctor_1", *doctor, "--out", f"{work}/clean_doctor_1.nc")
    t0 = time.time()
    runfile = f"{work}/clean_run.nc"
    code, _, secs, _ = ccbench("clean_run", work, "run", "all_reduce", "--backend", "nccl",
                               "-r", str(ngpu), "-b", a.size, "-e", a.size,
                               "--out", runfile, "--non-interactive")
    summary["run"] = {"exit": code, "seconds": secs, "loadavg": loadavg(),
                      "busbw_gbps": run_busbw(runfile) if code == 0 else None,
                      "command": f"ccbench run all_reduce --backend nccl -r {ngpu} "
                                 f"-b {a.size} -e {a.size}"}
    print(json.dumps(summary["run"]), flush=True)
    record(summary["clean"], "clean_doctor_2", *doctor, "--out", f"{work}/clean_doctor_2.nc")
    rng = random.Random()  # a new GPU each run, unseeded: the script picks, not us
    for k in range(a.runs):
        gpu = rng.randrange(ngpu)
        with competing_load(gpu, "compute"):
            record(summary["loaded"], f"loaded{k}", *doctor, "--out", f"{work}/loaded{k}.nc",
                   gpu=gpu)
    summary["elapsed_s"] = round(time.time() - t0, 1)
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    with open(os.path.join(a.out, "summary.md"), "w") as f:
        f.write(markdown(summary))
    print(markdown(summary))


def names_only(line, gpu):
    """Whether a verdict line names GPU `gpu` and no other GPU."""
    named = set(int(g) for g in re.findall(r"gpu(\d+)", line))
    return named == {gpu}


def markdown(s):
    rows = ["| run | loaded GPU | exit | verdict (GPU checks; nccl pairs) | host busbw GB/s | s "
            "| loadavg | names it alone |", "|---|---|---|---|---|---|---|---|"]
    for r in s["clean"] + s["loaded"]:
        gpu = r.get("gpu")
        ok = "" if gpu is None else ("yes" if names_only(r["verdict"], gpu) else "NO")
        rows.append(f"| {r['name']} | {'' if gpu is None else gpu} | {r['exit']} | "
                    f"`{r['verdict']}` (`{r.get('GPU checks')}`; `{r.get('nccl pairs')}`) | {r.get('host_busbw_gbps') or ''} | {r['seconds']} | "
                    f"{r['loadavg']} | {ok} |")
    run = s.get("run", {})
    rows.append("")
    rows.append(f"`{run.get('command')}`: exit {run.get('exit')}, busbw {run.get('busbw_gbps')} "
                f"GB/s, {run.get('seconds')} s, loadavg {run.get('loadavg')}")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    main()
