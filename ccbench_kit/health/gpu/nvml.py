"""The GPU's state through NVML (NVIDIA's ``nvidia-ml-py``, module ``pynvml``).

Never by parsing ``nvidia-smi`` text: its columns and wording change
between drivers; NVML's calls and their numbers do not.  A field NVML does
not give on this GPU or driver is NaN, and `State.missing` says why (not
supported, or the driver's NVML too old for the call).

XIDs: NVML keeps no count of the XID errors since boot (they are in the
kernel log, which we do not parse); it reports them as events to a process
registered for them.  `XidWatch` registers before the measurements and
collects what arrived after them: the XIDs *during the check*.
"""
import ctypes
import math
from dataclasses import dataclass, field

from ..._optional import require
from ...backends.nccl_topo import as_text
from ...errors import CCBenchError

# clock event ("throttle") reasons, nvml.h nvmlClocksEventReason*
REASONS = {0x1: "gpu idle", 0x2: "applications clocks setting", 0x4: "software power cap",
           0x8: "hardware slowdown", 0x10: "sync boost", 0x20: "software thermal slowdown",
           0x40: "hardware thermal slowdown", 0x80: "hardware power brake",
           0x100: "display clock setting"}
# the reasons that mean the GPU is held back by its condition, not by its work:
# thermal (software or hardware), hardware slowdown, power brake.  A software
# power cap is what a busy GPU meets at its limit; it is reported, not judged.
BAD_REASONS = 0x8 | 0x20 | 0x40 | 0x80
NVLINK_MAX_LINKS = 18  # NVML_NVLINK_MAX_LINKS (Hopper: 18)
# calls this module cannot do without (nvidia-ml-py 11.450 and later have them)
REQUIRED = ("nvmlInit", "nvmlDeviceGetHandleByPciBusId", "nvmlDeviceGetRemappedRows",
            "nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetNvLinkState")


class NvmlError(CCBenchError):
    """NVML missing, too old, or the driver not answering: the GPU mode cannot run."""

    exit_code = 2


def load():
    """pynvml, initialised; `NvmlError` (or MissingDependency) saying why not."""
    try:
        pynvml = require("pynvml", "gpu")
    except ImportError:
        raise
    except Exception as e:  # a Python 2 era pynvml fails to compile (SyntaxError)
        raise NvmlError(f"nvidia-ml-py cannot be imported ({type(e).__name__}: {e}): too old "
                        "for this Python; pip install -U 'ccbench_kit[gpu]'") from e
    missing = [f for f in REQUIRED if not hasattr(pynvml, f)]
    if missing:
        raise NvmlError(f"nvidia-ml-py is too old (no {', '.join(missing)}); "
                        "pip install -U 'ccbench_kit[gpu]'")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:
        raise NvmlError(f"NVML cannot start on this host ({e}): no NVIDIA driver here, so "
                        "no GPU to check") from e
    return pynvml


def shutdown(pynvml):
    try:
        pynvml.nvmlShutdown()
    except pynvml.NVMLError:
        pass




@dataclass
class State:
    """One GPU's state; NaN where NVML could not tell (`missing` says why)."""

    name: str = ""
    uuid: str = ""
    bus_id: str = ""
    values: dict = field(default_factory=dict)
    missing: dict = field(default_factory=dict)   # field -> why
    nvlink: list = field(default_factory=list)    # per supported link: 1 up, 0 down

    def get(self, key):
        return self.values.get(key, math.nan)


FIELDS = {  # name: (unit, what)
    "temperature_c": ("degC", "GPU temperature"),
    "power_w": ("W", "power draw"),
    "power_limit_w": ("W", "enforced power limit"),
    "sm_clock_mhz": ("MHz", "SM clock now"),
    "sm_clock_max_mhz": ("MHz", "SM clock max"),
    "mem_clock_mhz": ("MHz", "memory clock now"),
    "mem_clock_max_mhz": ("MHz", "memory clock max"),
    "clock_event_reasons": ("bitmask", "clock event (throttle) reasons, nvmlClocksEventReason*"),
    "pcie_gen": ("", "PCIe link generation now"),
    "pcie_gen_max": ("", "PCIe link generation max (device and system)"),
    "pcie_width": ("lanes", "PCIe link width now"),
    "pcie_width_max": ("lanes", "PCIe link width max"),
    "ecc_volatile_uncorrected": ("", "uncorrected ECC errors since the driver loaded"),
    "ecc_volatile_corrected": ("", "corrected ECC errors since the driver loaded"),
    "ecc_aggregate_uncorrected": ("", "uncorrected ECC errors, lifetime"),
    "ecc_aggregate_corrected": ("", "corrected ECC errors, lifetime"),
    "remapped_rows_correctable": ("", "rows remapped for correctable errors"),
    "remapped_rows_uncorrectable": ("", "rows remapped for uncorrectable errors"),
    "remap_pending": ("", "a row remap waits for a GPU reset (1)"),
    "remap_failure": ("", "a row remap failed (1)"),
    "nvlink_up": ("links", "NVLink links up"),
    "nvlink_links": ("links", "NVLink links the GPU has"),
    "xid_count": ("", "XID errors reported during the check"),
}


def read_state(pynvml, bus_id):
    """The `State` of the GPU at PCI `bus_id` (as CUDA names it)."""
    h = pynvml.nvmlDeviceGetHandleByPciBusId(bus_id)
    st = State(name=as_text(pynvml.nvmlDeviceGetName(h)),
               uuid=as_text(pynvml.nvmlDeviceGetUUID(h)), bus_id=bus_id)
    N = pynvml

    def put(key, fn, scale=1.0):
        try:
            v = fn()
        except N.NVMLError as e:
            st.missing[key] = _why(N, e)
            return
        st.values[key] = float(v) * scale
    put("temperature_c", lambda: N.nvmlDeviceGetTemperature(h, N.NVML_TEMPERATURE_GPU))
    put("power_w", lambda: N.nvmlDeviceGetPowerUsage(h), 1e-3)
    put("power_limit_w", lambda: N.nvmlDeviceGetEnforcedPowerLimit(h), 1e-3)
    for key, clock in (("sm", N.NVML_CLOCK_SM), ("mem", N.NVML_CLOCK_MEM)):
        put(f"{key}_clock_mhz", lambda c=clock: N.nvmlDeviceGetClockInfo(h, c))
        put(f"{key}_clock_max_mhz", lambda c=clock: N.nvmlDeviceGetMaxClockInfo(h, c))
    reasons = getattr(N, "nvmlDeviceGetCurrentClocksEventReasons", None) \
        or N.nvmlDeviceGetCurrentClocksThrottleReasons
    put("clock_event_reasons", lambda: reasons(h))
    put("pcie_gen", lambda: N.nvmlDeviceGetCurrPcieLinkGeneration(h))
    put("pcie_gen_max", lambda: N.nvmlDeviceGetMaxPcieLinkGeneration(h))
    put("pcie_width", lambda: N.nvmlDeviceGetCurrPcieLinkWidth(h))
    put("pcie_width_max", lambda: N.nvmlDeviceGetMaxPcieLinkWidth(h))
    for kind, ktag in (("uncorrected", N.NVML_MEMORY_ERROR_TYPE_UNCORRECTED),
                       ("corrected", N.NVML_MEMORY_ERROR_TYPE_CORRECTED)):
        for counter, ctag in (("volatile", N.NVML_VOLATILE_ECC),
                              ("aggregate", N.NVML_AGGREGATE_ECC)):
            put(f"ecc_{counter}_{kind}",
                lambda k=ktag, c=ctag: N.nvmlDeviceGetTotalEccErrors(h, k, c))
    try:
        rows = N.nvmlDeviceGetRemappedRows(h)
        for key, v in zip(("remapped_rows_correctable", "remapped_rows_uncorrectable",
                           "remap_pending", "remap_failure"), rows):
            st.values[key] = float(v)
    except N.NVMLError as e:
        for key in ("remapped_rows_correctable", "remapped_rows_uncorrectable",
                    "remap_pending", "remap_failure"):
            st.missing[key] = _why(N, e)
    for link in range(NVLINK_MAX_LINKS):
        try:
            st.nvlink.append(1 if N.nvmlDeviceGetNvLinkState(h, link) else 0)
        except N.NVMLError:
            continue  # a link this GPU does not have (or NVLink not supported)
    st.values["nvlink_links"] = float(len(st.nvlink))
    st.values["nvlink_up"] = float(sum(st.nvlink))
    return st


# nvmlNvLinkErrorCounter_t (nvml.h): the data-link layer's replays (a flit
# sent again), recoveries (the link retrained) and CRC errors (flit + data)
NVLINK_COUNTERS = {"nvlink_replay": (0,), "nvlink_recovery": (1,), "nvlink_crc": (2, 3)}


def nvlink_errors(pynvml, bus_id):
    """({counter: sum over the GPU's links that are up}, why missing or ""):
    `NVLINK_COUNTERS` since the driver loaded (or the counters were reset);
    NaN and a reason where NVML has no NVLink or no counter on this GPU."""
    N = pynvml
    if not hasattr(N, "nvmlDeviceGetNvLinkErrorCounter"):
        return ({key: math.nan for key in NVLINK_COUNTERS},
                "nvidia-ml-py has no nvmlDeviceGetNvLinkErrorCounter")
    h = N.nvmlDeviceGetHandleByPciBusId(bus_id)
    out = {key: 0.0 for key in NVLINK_COUNTERS}
    links, why = 0, ""
    for link in range(NVLINK_MAX_LINKS):
        try:
            if not N.nvmlDeviceGetNvLinkState(h, link):
                continue
        except N.NVMLError:
            continue  # a link this GPU does not have
        links += 1
        for key, counters in NVLINK_COUNTERS.items():
            for c in counters:
                try:
                    out[key] += float(N.nvmlDeviceGetNvLinkErrorCounter(h, link, c))
                except N.NVMLError as e:
                    out[key], why = math.nan, f"{key}: {_why(N, e)}"
    if not links:
        return {key: math.nan for key in NVLINK_COUNTERS}, "no NVLink link up on this GPU"
    return out, why


def _why(N, e):
    if isinstance(e, getattr(N, "NVMLError_FunctionNotFound", ())):
        return "the driver's NVML is too old for this call"
    if isinstance(e, getattr(N, "NVMLError_NotSupported", ())):
        return "not supported on this GPU"
    return str(e)


def reasons_text(mask):
    """'software power cap, hardware slowdown' for a reasons bitmask."""
    if mask is None or (isinstance(mask, float) and math.isnan(mask)):
        return "unknown"
    mask = int(mask)
    names = [n for bit, n in REASONS.items() if mask & bit]
    return ", ".join(names) if names else "none"


class XidWatch:
    """XID events of the given GPUs from now until `collect` (NVML events)."""

    def __init__(self, pynvml, bus_ids):
        self.N, self.ok, self.why = pynvml, False, ""
        self.handles = {b: pynvml.nvmlDeviceGetHandleByPciBusId(b) for b in bus_ids}
        try:
            self.set = pynvml.nvmlEventSetCreate()
            for h in self.handles.values():
                pynvml.nvmlDeviceRegisterEvents(h, pynvml.nvmlEventTypeXidCriticalError,
                                                self.set)
            self.ok = True
        except pynvml.NVMLError as e:
            self.why = f"XID events not available: {_why(pynvml, e)}"

    def collect(self):
        """{bus id: [xid, ...]} of the events that arrived (empty if none)."""
        out = {b: [] for b in self.handles}
        if not self.ok:
            return out
        N = self.N
        by_handle = {ctypes_addr(h): b for b, h in self.handles.items()}
        while True:
            try:
                ev = N.nvmlEventSetWait_v2(self.set, 0) if hasattr(N, "nvmlEventSetWait_v2") \
                    else N.nvmlEventSetWait(self.set, 0)
            except N.NVMLError:
                break  # a timeout: nothing more
            bus = by_handle.get(ctypes_addr(ev.device))
            if bus is not None:
                out[bus].append(int(ev.eventData))
        try:
            N.nvmlEventSetFree(self.set)
        except N.NVMLError:
            pass
        return out


def ctypes_addr(handle):
    """A device handle's address (handles from two calls compare by it)."""
    return ctypes.cast(handle, ctypes.c_void_p).value
