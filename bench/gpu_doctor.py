"""The GPU doctor's acceptance run on one GPU machine (issue 23), in one go.

    python bench/gpu_doctor.py --out OUTDIR [--work DIR]

1. an independent PyTorch measurement of the same figures (device copy,
   bf16 8192^3 matmul on random data, pinned H2D and D2H), CUDA events;
2. ``ccbench doctor --local --save-baseline`` on the idle GPUs (expect
   ``verdict: none``, exit 0);
3. with `testbed.gpu_load` looping a bf16 matmul on GPU 0: the doctor
   without a baseline (expect GPU 0 named, exit 1) and with the idle
   baseline (GPU 0 named against the baseline too);
4. with a memory-copy load on GPU 0, with the baseline;
5. idle again with the baseline (expect ``verdict: none``);
6. PyTorch again, to see the drift.

Writes OUTDIR/summary.md and OUTDIR/summary.json; the runs' results, logs
and the baseline go to --work (the wrapper packs them).
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def torch_reference(samples=5):
    """Medians (over `samples`) of the four figures through PyTorch."""
    import torch
    dev = torch.device("cuda", 0)
    out = {}

    def timed(fn, reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        fn()
        torch.cuda.synchronize(dev)
        vals = []
        for _ in range(samples):
            start.record()
            for _ in range(reps):
                fn()
            stop.record()
            stop.synchronize()
            vals.append(start.elapsed_time(stop) / 1e3 / reps)
        vals.sort()
        return vals[len(vals) // 2]
    src = torch.empty(1 << 30, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    out["hbm_gbps"] = 2 * src.numel() / timed(lambda: dst.copy_(src), 50) / 1e9
    del src, dst
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    for _ in range(100):  # clocks up, as the kit's warm-up does
        torch.matmul(a, b)
    out["matmul_tflops"] = 2 * 8192 ** 3 / timed(lambda: torch.matmul(a, b), 50) / 1e12
    del a, b
    host = torch.empty(256 << 20, dtype=torch.uint8).pin_memory()
    devbuf = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    out["h2d_gbps"] = host.numel() / timed(lambda: devbuf.copy_(host, non_blocking=True), 10) / 1e9
    out["d2h_gbps"] = host.numel() / timed(lambda: host.copy_(devbuf, non_blocking=True), 10) / 1e9
    del host, devbuf
    torch.cuda.empty_cache()
    return {k: round(v, 1) for k, v in out.items()}


def doctor(work, tag, *extra):
    """Run ``ccbench doctor --local`` once; its line, exit, times and figures."""
    out = os.path.join(work, f"{tag}.nc")
    cmd = [sys.executable, "-m", "ccbench_kit", "doctor", "--local", "--out", out, *extra]
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=240)
    wall = time.time() - t0
    with open(os.path.join(work, f"{tag}.log"), "w") as f:
        f.write(" ".join(cmd) + f"\nexit {p.returncode}, {wall:.1f} s\n{p.stdout}\n{p.stderr}")
    res = {"cmd": " ".join(cmd[2:]), "rc": p.returncode, "wall_s": round(wall, 1),
           "line": (p.stdout.strip().splitlines() or ["(no output)"])[-1],
           "stdout": p.stdout[-6000:], "stderr": p.stderr[-2000:]}
    if os.path.exists(out):
        from ccbench_kit.health.gpu import check
        ds = check.load(out)
        res["gpu_check_s"] = ds.attrs.get("gpu_check_s")
        res["figures"] = {f: [round(float(x), 1) for x in ds[f].median("repeat").values.ravel()]
                          for f in check.FIGURES}
        res["verdict"] = json.loads(ds.attrs["doctor_verdict"])
    return res


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", default=None)
    a = ap.parse_args(argv)
    work = a.work or a.out
    os.makedirs(work, exist_ok=True)
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    from testbed.gpu_load import competing_load
    base = os.path.join(work, "baseline.json")
    s = {"loadavg_start": open("/proc/loadavg").read().strip()}
    s["torch_before"] = torch_reference()
    s["idle"] = doctor(work, "idle", "--save-baseline", base)
    with competing_load(0, "compute"):
        s["loaded_compute"] = doctor(work, "loaded_compute")
        s["loaded_compute_baseline"] = doctor(work, "loaded_compute_baseline", "--baseline", base)
    with competing_load(0, "memory"):
        s["loaded_memory_baseline"] = doctor(work, "loaded_memory_baseline", "--baseline", base)
    s["idle_baseline"] = doctor(work, "idle_baseline", "--baseline", base)
    s["torch_after"] = torch_reference()
    s["loadavg_end"] = open("/proc/loadavg").read().strip()
    idle = s["idle"].get("figures", {})
    s["kit_over_torch"] = {f: round(idle[f][0] / s["torch_before"][f], 3)
                           for f in s["torch_before"] if f in idle}
    s["accept"] = {
        "idle verdict none, exit 0": s["idle"]["rc"] == 0 and s["idle"]["line"] == "verdict: none",
        "kit within 10 % of PyTorch (idle)": bool(s["kit_over_torch"]) and all(
            abs(r - 1) <= 0.10 for r in s["kit_over_torch"].values()),
        "compute load: gpu0 named, exit 1": s["loaded_compute"]["rc"] == 1
        and "gpu0" in s["loaded_compute"]["line"],
        "compute load, baseline: flagged against the baseline": s["loaded_compute_baseline"]["rc"] == 1
        and "baseline's" in s["loaded_compute_baseline"]["stdout"],
        "memory load, baseline: gpu0 named": s["loaded_memory_baseline"]["rc"] == 1
        and "gpu0" in s["loaded_memory_baseline"]["line"],
        "idle with baseline: verdict none": s["idle_baseline"]["line"] == "verdict: none",
        "GPU check < 60 s": all((s[k].get("gpu_check_s") or 1e9) < 60 for k in
                                ("idle", "loaded_compute", "idle_baseline")),
    }
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(s, f, indent=1)
    lines = [f"# GPU doctor acceptance ({time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())})", "",
             f"load average: start {s['loadavg_start']}; end {s['loadavg_end']}", "",
             f"PyTorch before: {s['torch_before']}", f"PyTorch after: {s['torch_after']}",
             f"kit (idle) / PyTorch: {s['kit_over_torch']}", ""]
    for k in ("idle", "loaded_compute", "loaded_compute_baseline", "loaded_memory_baseline",
              "idle_baseline"):
        r = s[k]
        lines += [f"## {k}: exit {r['rc']}, {r['line']}, wall {r['wall_s']} s, GPU check "
                  f"{r.get('gpu_check_s')} s", "", f"    {r['cmd']}", "", "```",
                  r["stdout"].strip(), r["stderr"].strip()[-1500:], "```", ""]
    lines += ["## acceptance", ""] + [f"- {'PASS' if ok else 'FAIL'}: {k}"
                                      for k, ok in s["accept"].items()]
    with open(os.path.join(a.out, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines[-len(s["accept"]):]))
    return 0 if all(s["accept"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
