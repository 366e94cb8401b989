"""A competing process that loads one GPU: the GPU doctor's fault, emulated.

    python -m testbed.gpu_load --gpu 0 --kind compute   # loops a bf16 8192^3 matmul
    python -m testbed.gpu_load --gpu 0 --kind memory    # loops a 2 GiB device copy
    python -m testbed.gpu_load --gpu 1 --kind peer-copy --peer 3   # 1 <-> 3 copies (NVLink)
    python -m testbed.gpu_load --gpu 2 --kind partial   # the matmul loop half the time
    python -m testbed.gpu_load --gpu 3 --kind pcie-copy # pinned host <-> GPU copies (PCIe)

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


KINDS = ("compute", "memory", "peer-copy", "partial", "pcie-copy")


def loop(gpu, kind, peer=None):
    """Loop `kind` on `gpu` until killed.  ``peer-copy``: 1 GiB copies
    `gpu` -> `peer`, then `peer` -> `gpu`, over and over (PyTorch's copy_
    between devices enables and uses peer access where the GPUs have it:
    the two GPUs' NVLink ports carry it, as the pair matrix's copies)."""
    import torch
    dev = torch.device("cuda", gpu)
    if kind == "peer-copy":
        if peer is None or peer == gpu:
            raise SystemExit("gpu_load: --kind peer-copy needs --peer, another GPU")
        other = torch.device("cuda", peer)
        a, b = (torch.empty(1 << 29, device=d, dtype=torch.int16) for d in (dev, other))
        a2, b2 = torch.empty_like(a), torch.empty_like(b)

        def step():
            b2.copy_(a)
            a2.copy_(b)
    elif kind in ("compute", "partial"):
        a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
        b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)

        def busy():
            torch.matmul(a, b)

        def idle_as_long():
            # the matmul's own time idle after it: the GPU busy about half the time
            t0 = time.perf_counter()
            busy()
            torch.cuda.synchronize(dev)
            time.sleep(time.perf_counter() - t0)

        step = busy if kind == "compute" else idle_as_long
    elif kind == "pcie-copy":
        host = torch.empty(1 << 29, dtype=torch.int16).pin_memory()
        devbuf = torch.empty(1 << 29, device=dev, dtype=torch.int16)

        def step():
            devbuf.copy_(host, non_blocking=True)
            host.copy_(devbuf, non_blocking=True)
    else:
        src = torch.empty(1 << 30, device=dev, dtype=torch.int16)
        dst = torch.empty_like(src)

        def step():
            dst.copy_(src)
    for _ in range(3):
        step()
    sync = (lambda: [torch.cuda.synchronize(d) for d in (dev, other)]) \
        if kind == "peer-copy" else (lambda: torch.cuda.synchronize(dev))
    sync()
    print("ready", flush=True)
    while True:
        for _ in range(20):
            step()
        sync()


@contextlib.contextmanager
def competing_load(gpu=0, kind="compute", timeout=60, peer=None):
    """Run `loop` in a child process for the duration of the block."""
    extra = ["--peer", str(peer)] if peer is not None else []
    proc = subprocess.Popen([sys.executable, "-m", "testbed.gpu_load", "--gpu", str(gpu),
                             "--kind", kind, *extra], stdout=subprocess.PIPE, text=True,
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
    p.add_argument("--kind", choices=KINDS, default="compute")
    p.add_argument("--peer", type=int, default=None, help="peer-copy: the other GPU")
    a = p.parse_args(argv)
    loop(a.gpu, a.kind, a.peer)


if __name__ == "__main__":
    main()
