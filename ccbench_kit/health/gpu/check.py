"""The GPU local check of one node: every GPU's rates and NVML state, as a
Dataset (dims node, gpu, repeat).

The figures are repeated `repeats` times, interleaved (every GPU, every
figure, then again), GPU after GPU: GPUs of one node may share a PCIe
switch and always share the host's memory and power, so measured at once
they would measure each other.  A check costs about 1 s a GPU plus the
set-up (bench/RESULTS.md); nodes check their own GPUs at the same time.
"""
import datetime
import json
import socket
import time
from dataclasses import dataclass

import numpy as np
import xarray as xr

from ..._version import __version__
from ...dataset import io
from ...dataset.schema import GPU_CHECK, SCHEMA
from ...errors import ConfigError
from . import cuda as _cuda
from . import nvml as _nvml

# name: (unit, what, the preset's typical figure)
FIGURES = {
    "hbm_gbps": ("GB/s", "device-to-device copy (HBM), bytes read + written", "hbm_typical_gbps"),
    "matmul_tflops": ("TFLOP/s", "bf16 8192^3 matrix product (cuBLAS, fp32 accumulation), "
                                 "random data", "matmul_typical_tflops"),
    "h2d_gbps": ("GB/s", "pinned host -> device copy (PCIe)", "pcie_typical_gbps"),
    "d2h_gbps": ("GB/s", "device -> pinned host copy (PCIe)", "pcie_typical_gbps"),
}
PCIE_KEYS = ("pcie_gen", "pcie_gen_max", "pcie_width", "pcie_width_max")


@dataclass
class Inventory:
    """The GPUs to check, found before anything is measured."""

    pynvml: object
    runtime: object
    indices: list
    bus_ids: list
    names: list
    node: str

    def close(self):
        _nvml.shutdown(self.pynvml)


def parse_gpus(spec, count, flag="--gpus"):
    """CUDA indices from '0,2,5' (None: all `count`)."""
    if spec in (None, "", "all"):
        return list(range(count))
    try:
        out = [int(x) for x in str(spec).split(",")]
    except ValueError:
        raise ConfigError(f"give GPU indices like 0,1,3, got {spec!r}", flag) from None
    bad = [k for k in out if not 0 <= k < count]
    if bad or len(set(out)) != len(out):
        raise ConfigError(f"{spec!r}: this node has GPUs 0-{count - 1}, each named once", flag)
    return out


def check_models(names, indices, flag="--gpus"):
    """Refuse GPUs of different models: their figures cannot be peers."""
    models = dict(zip(indices, names))
    if len(set(models.values())) > 1:
        seen = ", ".join(f"gpu{k} {n}" for k, n in models.items())
        raise ConfigError(f"GPUs of different models on one node ({seen}): their figures are "
                          "not comparable; check one model at a time with --gpus", flag)


def inventory(gpus=None, node=None):
    """NVML and CUDA up, the GPUs chosen and named: `Inventory`.

    Raises NvmlError / MissingDependency / CudaError (no GPU, no driver, no
    library) or ConfigError (`--gpus`, mixed models) before anything runs."""
    pynvml = _nvml.load()
    try:
        if pynvml.nvmlDeviceGetCount() == 0:
            raise _nvml.NvmlError("NVML sees no GPU on this host")
        runtime = _cuda.Runtime()
        count = runtime.device_count()
        if count == 0:
            raise _cuda.CudaError("CUDA sees no GPU on this host (CUDA_VISIBLE_DEVICES?)")
        indices = parse_gpus(gpus, count)
        bus = [runtime.pci_bus_id(k) for k in indices]
        handles = [pynvml.nvmlDeviceGetHandleByPciBusId(b) for b in bus]
        names = [_nvml.as_text(pynvml.nvmlDeviceGetName(h)) for h in handles]
        check_models(names, indices)
    except BaseException:
        _nvml.shutdown(pynvml)
        raise
    return Inventory(pynvml, runtime, indices, bus, names, node or socket.gethostname())


def measure(inv, repeats=5, progress=None):
    """The Dataset of `inv`'s GPUs: figures (node, gpu, repeat) and NVML state
    (node, gpu)."""
    if not isinstance(repeats, int) or repeats < 2:
        raise ConfigError(f"must be an integer >= 2, got {repeats!r}", "--repeats")
    say = progress or (lambda msg: None)
    t0 = time.perf_counter()
    xid = _nvml.XidWatch(inv.pynvml, inv.bus_ids)
    devices, states = [], {}
    samples = {f: np.full((len(inv.indices), repeats), np.nan) for f in FIGURES}
    try:
        for k in inv.indices:
            say(f"gpu{k}: allocating and warming up")
            devices.append(_cuda.Device(inv.runtime, k))
            devices[-1].warm_up()
        for rep in range(repeats):
            for j, dev in enumerate(devices):
                samples["hbm_gbps"][j, rep] = dev.hbm_gbps()
                samples["matmul_tflops"][j, rep] = dev.matmul_tflops()
                if rep == repeats - 1:  # clocks, power and reasons under load
                    states[j] = _nvml.read_state(inv.pynvml, inv.bus_ids[j])
                samples["h2d_gbps"][j, rep] = dev.h2d_gbps()
                samples["d2h_gbps"][j, rep] = dev.d2h_gbps()
                if rep == repeats - 1:  # the link right after traffic (idle links downshift)
                    link = _nvml.read_state(inv.pynvml, inv.bus_ids[j])
                    states[j].values.update({key: link.values[key] for key in PCIE_KEYS
                                             if key in link.values})
            say(f"repeat {rep + 1}/{repeats} done")
    finally:
        for dev in devices:
            dev.close()
    xids = xid.collect()
    elapsed = time.perf_counter() - t0
    runtime, driver = inv.runtime.versions()
    info = {"cuda_runtime": runtime, "cuda_driver": driver,
            "nvidia_driver": _nvml.as_text(inv.pynvml.nvmlSystemGetDriverVersion())}
    ds = to_dataset(inv.node, inv.indices, inv.names, inv.bus_ids, samples,
                    [states[j] for j in range(len(inv.indices))], xids, xid.why, info)
    ds.attrs["gpu_check_s"] = round(elapsed, 2)
    return ds


def to_dataset(node, indices, names, bus_ids, samples, states, xids, xid_why, info):
    """The check's Dataset: `samples` {figure: (gpu, repeat) array}, `states`
    one `nvml.State` a GPU, `xids` {bus id: [xid]}, `info` versions (attrs)."""
    repeats = next(iter(samples.values())).shape[1]
    ds = xr.Dataset(coords={"node": [node], "gpu": list(indices),
                            "repeat": np.arange(repeats)})
    for name, (unit, what, _) in FIGURES.items():
        ds[name] = (("node", "gpu", "repeat"), samples[name][None],
                    {"units": unit, "long_name": what, "better": "higher"})
    for st, bus in zip(states, bus_ids):
        st.values["xid_count"] = float(len(xids.get(bus, [])))
    for name, (unit, what) in _nvml.FIELDS.items():
        ds[name] = (("node", "gpu"), np.array([[st.get(name) for st in states]]),
                    {"units": unit, "long_name": what})
    ds = ds.assign_coords(gpu_name=(("node", "gpu"), np.array([list(names)])),
                          gpu_uuid=(("node", "gpu"), np.array([[s.uuid for s in states]])),
                          gpu_bus_id=(("node", "gpu"), np.array([list(bus_ids)])))
    missing = {f"gpu{k}": st.missing for k, st in zip(indices, states) if st.missing}
    ds.attrs.update({
        "schema": SCHEMA, "kind": GPU_CHECK, "kit_version": __version__,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        **info, "nvml_missing": json.dumps(missing),
        "xids": json.dumps({f"gpu{k}": xids.get(b, []) for k, b in zip(indices, bus_ids)}),
        "xid_note": xid_why or "XIDs counted are those NVML reported during the check; NVML "
                               "keeps no count since boot (see the kernel log)",
    })
    return ds


def save(ds, path):
    """Write the GPU Dataset to `path` (the kit's results file, replaced whole)."""
    return io.save(ds, path)


def load(path):
    """The GPU check in `path` (files of the check's own schema of before,
    ``ccbench-doctor-gpu/1``, upgraded); any other results refused in one line."""
    return io.load(path, kind=GPU_CHECK)
