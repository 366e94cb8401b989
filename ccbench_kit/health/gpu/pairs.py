"""The NVLink pair matrix of one node (``ccbench doctor --local`` with 2 GPUs
or more): every ordered pair's peer copy rate and latency, every pair's
rate both ways at once (`peer.PeerCopies`), every ordered pair's SM copy
rate and SM load latency (`sm_copy.SmCopies`, where NVRTC is found), and
each GPU's NVLink error counters read before and after
(`nvml.nvlink_errors`), as Dataset variables beside the GPU figures
(`check`).

Pairs are measured one at a time, repeats interleaved (every pair, then
again), as the GPU figures are: on an NVSwitch node two pairs at once would
share the GPUs' links and measure each other.  The matrix costs n (n - 1)
one-way copies, n (n - 1) / 2 two-way copies and n (n - 1) latency runs a
repeat, as many SM copies and 10 ms pointer chases: 0.3 s a repeat on
4 H200 (1.5-2.1 s for 5 repeats, 12 links), so about 1.4 s on 8 GPUs (56
links; docs/doctor.md).
"""
import json
import time

import numpy as np
import xarray as xr

from ...errors import ConfigError
from . import nvml as _nvml
from .cuda import CudaError
from .peer import PeerCopies
from .sm_copy import SmCopies, SmUnavailable

# name: (dimension, unit, what, better)
PAIR_FIGURES = {
    "peer_gbps": ("link", "GB/s", "one-way peer copy (cudaMemcpyPeerAsync on the source's "
                                  "copy engine)", "higher"),
    "peer_bidir_gbps": ("pair", "GB/s", "peer copies both ways at once, the two directions "
                                        "summed", "higher"),
    "peer_latency_us": ("link", "us", "8 B peer copy, median of 50 event-timed copies",
                        "lower"),
    "peer_sm_gbps": ("link", "GB/s", "SM copy: a kernel on the source writing into the peer "
                                     "(nvbandwidth's memcpy_write_sm)", "higher"),
    "peer_sm_latency_us": ("link", "us", "SM load latency: one thread of the source chasing "
                                         "pointers in the peer's memory (nvbandwidth's "
                                         "latency_sm)", "lower"),
}
SHORT = {"peer_gbps": "peer copy", "peer_bidir_gbps": "both ways", "peer_latency_us": "latency",
         "peer_sm_gbps": "SM copy", "peer_sm_latency_us": "SM latency"}
SM_FIGURES = ("peer_sm_gbps", "peer_sm_latency_us")


def link_label(a, b):
    return f"{a}->{b}"


def pair_label(a, b):
    return f"{a}<->{b}"


def named(label):
    """A link or pair label for people: '1->3' gives 'gpu1->gpu3'."""
    sep = "<->" if "<->" in label else "->"
    a, b = ends(label)
    return f"gpu{a}{sep}gpu{b}"


def ends(label):
    """(a, b) of a link or pair label: '1->3' and '1<->3' give (1, 3)."""
    a, b = label.replace("<->", "->").split("->")
    return int(a), int(b)


def wanted(flag, count):
    """Whether to run the pair matrix: `flag` (``--pairs``/``--no-pairs``, None:
    where there are 2 GPUs or more); ConfigError when asked for on fewer."""
    if flag and count < 2:
        raise ConfigError(f"the pair matrix copies between GPUs: it needs at least 2, this "
                          f"check has {count}", "--pairs")
    return count >= 2 if flag is None else bool(flag)


def measure(inv, repeats, progress=None):
    """The pair matrix of `inv`'s GPUs (a `check.Inventory`): a Dataset with
    `PAIR_FIGURES` (node, link|pair, repeat) and the NVLink counters (node, gpu)."""
    say = progress or (lambda msg: None)
    t0 = time.perf_counter()
    idx = list(inv.indices)
    links = [(a, b) for a in idx for b in idx if a != b]
    pairs = [(a, b) for a in idx for b in idx if a < b]
    samples = {name: np.full((len(links if dim == "link" else pairs), repeats), np.nan)
               for name, (dim, *_) in PAIR_FIGURES.items()}
    before = [_nvml.nvlink_errors(inv.pynvml, b) for b in inv.bus_ids]
    say(f"pair matrix: {len(pairs)} pairs of {len(idx)} GPUs")
    copies = PeerCopies(inv.runtime, idx)
    sm, sm_missing = None, ""
    try:
        access = dict(copies.access)
        for a, b in links:  # untimed: the first copy of a pair maps the peer's memory
            if access[(a, b)]:
                copies.one_way_gbps(a, b, reps=1)
        sm, sm_missing = _sm_kernels(copies, [ab for ab in links if access[ab]])
        for rep in range(repeats):
            for i, (a, b) in enumerate(links):
                if access[(a, b)]:
                    samples["peer_gbps"][i, rep] = copies.one_way_gbps(a, b)
                    samples["peer_latency_us"][i, rep] = copies.latency_us(a, b)
                    if sm is not None:
                        samples["peer_sm_gbps"][i, rep] = sm.one_way_gbps(a, b)
                        samples["peer_sm_latency_us"][i, rep] = sm.latency_us(a, b)
            for i, (a, b) in enumerate(pairs):
                if access[(a, b)] and access[(b, a)]:
                    samples["peer_bidir_gbps"][i, rep] = copies.both_ways_gbps(a, b)
            say(f"pair matrix repeat {rep + 1}/{repeats} done")
    finally:
        if sm is not None:
            sm.close()
        copies.close()
    after = [_nvml.nvlink_errors(inv.pynvml, b) for b in inv.bus_ids]
    if sm is None:
        samples = {k: v for k, v in samples.items() if k not in SM_FIGURES}
    ds = to_dataset(inv.node, idx, samples, access, before, after)
    ds.attrs["pair_matrix_s"] = round(time.perf_counter() - t0, 2)
    ds.attrs["peer_sm_missing"] = sm_missing
    return ds


def _sm_kernels(copies, links):
    """(`SmCopies`, "") with each of `links` run once untimed, or (None, why
    the SM figures are not measured): the copy-engine figures go on."""
    try:
        sm = SmCopies(copies)
    except SmUnavailable as e:
        return None, str(e)
    try:
        for a, b in links:
            sm.one_way_gbps(a, b, reps=1)
            sm.latency_us(a, b, loads=100)
    except CudaError as e:  # a kernel the GPU refuses at launch
        sm.close()
        return None, f"the SM kernels do not run here: {e}"
    return sm, ""


def to_dataset(node, indices, samples, access, before, after):
    """The pair matrix's Dataset: `samples` {figure: (link or pair, repeat)
    array} in `measure`'s order, `access` {(a, b): bool}, `before`/`after`
    one (counters, why) a GPU (`nvml.nvlink_errors`)."""
    idx = list(indices)
    links = [link_label(a, b) for a in idx for b in idx if a != b]
    pairs = [pair_label(a, b) for a in idx for b in idx if a < b]
    repeats = next(iter(samples.values())).shape[1]
    ds = xr.Dataset(coords={"node": [node], "link": links, "pair": pairs,
                            "repeat": np.arange(repeats), "gpu": idx})
    for name, (dim, unit, what, better) in PAIR_FIGURES.items():
        if name not in samples:
            continue  # the SM figures where their kernels could not run (`measure`)
        ds[name] = (("node", dim, "repeat"), samples[name][None],
                    {"units": unit, "long_name": what, "better": better})
    for key in _nvml.NVLINK_COUNTERS:
        total = np.array([[a[0][key] for a in after]])
        ds[f"{key}_total"] = (("node", "gpu"), total,
                              {"long_name": f"{key} errors summed over the GPU's NVLink links, "
                                            "since the driver loaded"})
        ds[f"{key}_during"] = (("node", "gpu"), total - np.array([[b[0][key] for b in before]]),
                               {"long_name": f"{key} errors during the pair matrix"})
    no_access = [pair_label(a, b) for a in idx for b in idx
                 if a < b and not (access[(a, b)] and access[(b, a)])]
    missing = {f"gpu{k}": why for k, (_, why) in zip(idx, after) if why}
    ds.attrs.update({"peer_no_access": json.dumps(no_access),
                     "nvlink_counters_missing": json.dumps(missing)})
    return ds
