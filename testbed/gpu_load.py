"""A competing process that loads one GPU: the GPU doctor's fault, emulated.

    python -m testbed.gpu_load --gpu 0 --kind compute   # loops a bf16 8192^3 matmul
    python -m testbed.gpu_load --gpu 0 --kind memory    # loops a 2 GiB device copy

It prints ``ready`` once the loop runs and loops until it is killed.
`competing_load` starts it, waits for ``ready`` and stops it by its PID.
Test and benchmark code only (PyTorch, which the product never imports): the
GPU under test is shared by time slices, as when another job lands on it.
"""
import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time


def loop(gpu, kind):
    import torch
    dev = torch.device("cuda", gpu)
    if kind == "compute":
        a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
        b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)

        def step():
            torch.matmul(a, b)
    else:
        src = torch.empty(1 << 30, device=dev, dtype=torch.int16)
        dst = torch.empty_like(src)

        def step():
            dst.copy_(src)
    for _ in range(3):
        step()
    torch.cuda.synchronize(dev)
    print("ready", flush=True)
    while True:
        for _ in range(20):
            step()
        torch.cuda.synchronize(dev)


@contextlib.contextmanager
def competing_load(gpu=0, kind="compute", timeout=60):
    """Run `loop` in a child process for the duration of the block."""
    proc = subprocess.Popen([sys.executable, "-m", "testbed.gpu_load", "--gpu", str(gpu),
                             "--kind", kind], stdout=subprocess.PIPE, text=True,
                            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            start_new_session=True)
    try:
        end = time.monotonic() + timeout
        line = proc.stdout.readline()
        if line.strip() != "ready" or time.monotonic() > end:
            raise RuntimeError(f"the GPU load did not start (it said {line!r}, "
                               f"exit {proc.poll()})")
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # its own session: only what it started
        proc.wait(timeout=30)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gpu", type=int, default=0)
    p.add_argument("--kind", choices=("compute", "memory"), default="compute")
    a = p.parse_args(argv)
    loop(a.gpu, a.kind)


if __name__ == "__main__":
    main()
