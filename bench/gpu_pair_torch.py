"""The doctor's pair matrix beside PyTorch, on the device (issue: "the pair
matrix beside nvbandwidth's own numbers, or beside a PyTorch copy_ between
the same GPUs, within 5 %"):

    python bench/gpu_pair_torch.py RESULTS.nc [--reps 5] [--mib 256]

For every ordered pair a -> b of the GPUs the doctor's run measured:
`dst_b.copy_(src_a)` of 256 MiB, five back to back, timed with CUDA events
on a's current stream (with peer access on, PyTorch issues a peer copy on
the copy engine: what the doctor's ``peer_gbps`` measures), median of
`--reps`.  The doctor's SM copy is printed beside it for reading, not
compared (PyTorch has no SM write to a peer to compare it with).  One row a
link and the ratio range; run it alone, after the doctor, never beside a
load.
"""
import argparse
import sys

import numpy as np


def torch_copy_gbps(torch, a, b, nbytes, reps):
    src = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{a}")
    dst = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{b}")
    with torch.cuda.device(a):
        dst.copy_(src)  # untimed: maps the peer
        torch.cuda.synchronize(a)
        rates = []
        for _ in range(reps):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(5):
                dst.copy_(src, non_blocking=True)
            stop.record()
            stop.synchronize()
            rates.append(5 * nbytes / (start.elapsed_time(stop) / 1e3) / 1e9)
    del src, dst
    torch.cuda.empty_cache()
    return float(np.median(rates))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--mib", type=int, default=256)
    args = ap.parse_args(argv)
    import torch
    from ccbench_kit.health.gpu import check
    ds = check.load(args.results)
    node = str(ds["node"].values[0])
    ratios = []
    print(f"{'link':<12}{'doctor CE':>12}{'torch copy_':>13}{'ratio':>8}{'doctor SM':>12}")
    for label in [str(x) for x in ds["link"].values]:
        a, b = map(int, label.split("->"))
        ce = float(np.nanmedian(ds["peer_gbps"].sel(node=node, link=label).values))
        sm = (float(np.nanmedian(ds["peer_sm_gbps"].sel(node=node, link=label).values))
              if "peer_sm_gbps" in ds else float("nan"))
        t = torch_copy_gbps(torch, a, b, args.mib << 20, args.reps)
        ratios.append(ce / t)
        print(f"gpu{a}->gpu{b:<6}{ce:>12.1f}{t:>13.1f}{ce / t:>8.3f}{sm:>12.1f}")
    print(f"doctor CE / torch copy_: {min(ratios):.3f}-{max(ratios):.3f} over {len(ratios)} links"
          f" ({'within' if max(abs(r - 1) for r in ratios) <= 0.05 else 'NOT within'} 5 %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
