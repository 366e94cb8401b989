"""What nccl-tests says about a run, shared by its text and JSON readers."""
import re

NAME = "nccl-tests"

_DEVICE = re.compile(r"Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+"
                     r"device\s+(\d+)\s+\[([^\]]*)\]\s*(.*)")


def nccl_version(code):
    """``22809`` -> ``"2.28.9"``; NCCL_VERSION_CODE changed layout at 2.9."""
    try:
        code = int(code)
    except (TypeError, ValueError):
        return ""
    if code <= 0:
        return ""
    if code < 10000:
        return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"
    return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"


def collective_of_program(program):
    """``./build/all_reduce_perf_mpi`` -> ``all_reduce``; None if not a test."""
    m = re.search(r"([a-z_]+?)_perf(?:_mpi)?\b", str(program).rsplit("/", 1)[-1])
    return m.group(1) if m else None


def parse_device(text):
    """A ``#  Rank 0 Group 0 Pid 1364 on vm device 0 [0000:00:06] NVIDIA H200``
    line as a dict, or None."""
    m = _DEVICE.search(text)
    if not m:
        return None
    return {"rank": int(m.group(1)), "group": int(m.group(2) or 0), "pid": int(m.group(3)),
            "hostname": m.group(4), "device": int(m.group(5)), "device_hex": m.group(6),
            "device_info": m.group(7).strip()}


def algorithm_name(env):
    """``nccl`` (NCCL's own choice), or ``nccl:ring/ll`` when NCCL_ALGO and
    NCCL_PROTO pin one algorithm and protocol, as the kit names them."""
    algo = str(env.get("NCCL_ALGO", "")).strip().lower()
    proto = str(env.get("NCCL_PROTO", "")).strip().lower()
    single = re.compile(r"^[a-z0-9_]+$")
    name = "nccl"
    if algo and single.match(algo):
        name += f":{algo}"
    if proto and single.match(proto):
        name += f"/{proto}" if ":" in name else f":*/{proto}"
    return name


def ranks_from_devices(devices):
    """(nranks, group_size or None, hosts) from the device list."""
    if not devices:
        return None, None, []
    ranks = {d["rank"] for d in devices}
    groups = {}
    for d in devices:
        groups.setdefault(d["group"], set()).add(d["rank"])
    group_size = None
    if len(groups) > 1:
        sizes = {len(v) for v in groups.values()}
        if len(sizes) == 1:
            group_size = sizes.pop()
    hosts = sorted({d["hostname"] for d in devices})
    return len(ranks), group_size, hosts


def _count(v):
    try:
        v = int(v)
    except (TypeError, ValueError, OverflowError):
        return None
    return v if v > 0 else None


def aggregated_text(iters=None, agg=None, cputime=False, blocking=""):
    iters, agg = _count(iters), _count(agg)
    n = f"{iters} " if iters else ""
    what = "CPU time to launch" if cputime else "wall time of"
    text = (f"nccl-tests time: {what} {n}back-to-back iterations divided by their number"
            + (f" (x{agg} aggregated per iteration, -m)" if agg and agg > 1 else "")
            + ", then averaged over ranks (nccl-tests' default -a 1)")
    if blocking:
        text += f"; {blocking}"
    return text
