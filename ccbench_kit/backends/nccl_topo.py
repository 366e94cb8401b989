"""How this host's GPUs are linked: a matrix in `nvidia-smi topo -m`'s terms.

Through NVML (nvidia-ml-py) when it is installed, else the text of
``nvidia-smi topo -m``; neither is required.
"""
import re
import shutil
import subprocess

# nvmlGpuTopologyLevel_t -> nvidia-smi's abbreviations
_LEVELS = {0: "X", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}


def nvml_matrix():
    """{"source": "nvml", "devices": [...], "matrix": [[...]]} or None.

    An entry is ``NV<k>`` for k NVLinks between the pair (``NVLINK`` where
    the links end in an NVSwitch), else the PCIe level (PIX ... SYS).
    """
    try:
        import pynvml  # lazy: optional dependency (nccl extra)
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:  # no driver, no GPU: no matrix
        return None
    try:
        n = pynvml.nvmlDeviceGetCount()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
        bus = [as_text(pynvml.nvmlDeviceGetPciInfo(h).busId) for h in handles]
        links = [_nvlink_peers(pynvml, h) for h in handles]
        matrix = []
        for i in range(n):
            row = []
            for j in range(n):
                if i == j:
                    row.append("X")
                    continue
                k = sum(1 for peer in links[i] if _same_bus(peer, bus[j]))
                if k:
                    row.append(f"NV{k}")
                    continue
                try:
                    ok = pynvml.nvmlDeviceGetP2PStatus(handles[i], handles[j],
                                                       pynvml.NVML_P2P_CAPS_INDEX_NVLINK)
                    if ok == pynvml.NVML_P2P_STATUS_OK:
                        row.append("NVLINK")
                        continue
                except pynvml.NVMLError:  # not supported on this pair: ask for the PCIe level
                    pass
                try:
                    lvl = pynvml.nvmlDeviceGetTopologyCommonAncestor(handles[i], handles[j])
                    row.append(_LEVELS.get(int(lvl), str(lvl)))
                except pynvml.NVMLError:
                    row.append("?")
            matrix.append(row)
        names = [as_text(pynvml.nvmlDeviceGetName(h)) for h in handles]
        return {"source": "nvml", "devices": bus, "names": names, "matrix": matrix}
    except pynvml.NVMLError as e:  # recorded in the run's attrs, not raised
        return {"source": "nvml", "error": f"{type(e).__name__}: {e}"}
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


def as_text(v):
    """An NVML string (bytes in older nvidia-ml-py releases) as str."""
    return v.decode() if isinstance(v, bytes) else str(v)


def _same_bus(a, b):
    """PCI bus ids compare without domain width or case differences."""
    norm = lambda s: s.lower().split(":", 1)[-1] if s.count(":") == 2 else s.lower()
    return norm(a) == norm(b)


def _nvlink_peers(pynvml, h):
    peers = []
    for link in range(getattr(pynvml, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            if pynvml.nvmlDeviceGetNvLinkState(h, link) != pynvml.NVML_FEATURE_ENABLED:
                continue
            peers.append(as_text(pynvml.nvmlDeviceGetNvLinkRemotePciInfo(h, link).busId))
        except pynvml.NVMLError:  # past the device's last link, or NVLink not supported
            break
    return peers


def smi_text(timeout=10):
    """``nvidia-smi topo -m`` output, or '' where there is none."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return ""
    try:
        out = subprocess.run([exe, "topo", "-m"], capture_output=True, text=True,
                             timeout=timeout).stdout
        return re.sub(r"\x1b\[[0-9;]*m", "", out).strip()  # no terminal colours
    except (OSError, subprocess.SubprocessError):
        return ""


def topology():
    """The matrix (NVML) and the nvidia-smi text, whichever exist."""
    out = nvml_matrix() or {"source": "none"}
    text = smi_text()
    if text:
        out["nvidia_smi_topo"] = text
    return out
