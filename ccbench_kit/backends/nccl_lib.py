"""Finding libnccl and the CUDA runtime at run time.

Search order, for each library: an explicit path (``CCB_NCCL_LIBRARY`` /
``CCB_CUDART_LIBRARY`` / ``CCB_CUBLAS_LIBRARY`` / ``CCB_NVRTC_LIBRARY``), the toolkit's home (``NCCL_HOME``; ``CUDA_HOME``,
``CUDA_PATH``), the ``nvidia-*`` wheels' folders on ``sys.path``,
cuda-pathfinder when installed, then the system's loader (LD_LIBRARY_PATH,
the ldconfig cache).  The first hit wins; a miss names every place tried.
"""
import ctypes
import glob
import os
import sys
from dataclasses import dataclass, field

from ..errors import CCBenchError


class LibraryNotFound(CCBenchError):
    """libnccl or libcudart is not on this machine, or can't be opened."""

    exit_code = 2


@dataclass
class Found:
    path: str = ""
    looked: list = field(default_factory=list)


# What each library is called in each place.
NCCL_NAMES = ("libnccl.so.2", "libnccl.so")
CUDART_NAMES = ("libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so")
NCCL_WHEEL_DIRS = ("nvidia/nccl/lib",)
CUDART_WHEEL_DIRS = ("nvidia/cu13/lib", "nvidia/cuda_runtime/lib", "nvidia/cu12/lib")
# cuBLAS: the doctor's GPU matrix product (health/gpu/cuda.py)
CUBLAS_NAMES = ("libcublas.so.13", "libcublas.so.12", "libcublas.so")
CUBLAS_WHEEL_DIRS = ("nvidia/cu13/lib", "nvidia/cublas/lib", "nvidia/cu12/lib")
# NVRTC: the compiler of the kit's own GPU kernels (backends/gpu_kernels)
NVRTC_NAMES = ("libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so")
NVRTC_WHEEL_DIRS = ("nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib", "nvidia/cu12/lib")


def _wheel_roots():
    roots = []
    for p in sys.path:
        if p and os.path.isdir(p) and p not in roots:
            roots.append(p)
    return roots


def _in_dirs(dirs, names):
    for d in dirs:
        for n in names:
            hits = sorted(glob.glob(os.path.join(d, n)))
            if hits:
                return hits[0]
    return ""


def _system(names):
    """The first name the dynamic loader resolves, as a path where it can say."""
    for n in names:
        try:
            ctypes.CDLL(n, mode=os.RTLD_LOCAL)
        except OSError:
            continue
        return _loaded_path(n) or n
    return ""


def _loaded_path(soname):
    """The file a loaded library came from (/proc/self/maps), or ''."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.rsplit(" ", 1)[-1].strip()
                if os.path.basename(path).startswith(soname.split(".so")[0] + ".so"):
                    return path
    except OSError:
        pass
    return ""


def _pathfinder(libname):
    try:
        # lazy: optional dependency (nccl extra)
        from cuda.pathfinder import load_nvidia_dynamic_lib
    except ImportError:
        return "", "cuda-pathfinder (not installed)"
    try:
        loaded = load_nvidia_dynamic_lib(libname)
    except Exception as e:  # its own not-found error, whatever its class
        return "", f"cuda-pathfinder ({type(e).__name__})"
    return getattr(loaded, "abs_path", "") or "", "cuda-pathfinder"


def find(which, env=None):
    """Locate ``"nccl"``, ``"cudart"``, ``"cublas"`` or ``"nvrtc"``; a `Found` with the places tried."""
    env = os.environ if env is None else env
    if which == "nccl":
        names, explicit, homes, wheel_dirs = NCCL_NAMES, "CCB_NCCL_LIBRARY", ("NCCL_HOME",), NCCL_WHEEL_DIRS
    elif which == "cudart":
        names, explicit, homes, wheel_dirs = CUDART_NAMES, "CCB_CUDART_LIBRARY", ("CUDA_HOME", "CUDA_PATH"), CUDART_WHEEL_DIRS
    elif which == "cublas":
        names, explicit, homes, wheel_dirs = CUBLAS_NAMES, "CCB_CUBLAS_LIBRARY", ("CUDA_HOME", "CUDA_PATH"), CUBLAS_WHEEL_DIRS
    elif which == "nvrtc":
        names, explicit, homes, wheel_dirs = NVRTC_NAMES, "CCB_NVRTC_LIBRARY", ("CUDA_HOME", "CUDA_PATH"), NVRTC_WHEEL_DIRS
    else:
        raise ValueError(which)
    out = Found()
    path = env.get(explicit, "")
    out.looked.append(f"${explicit}" + (f"={path}" if path else " (unset)"))
    if path:
        if os.path.isfile(path):
            out.path = path
            return out
        out.looked[-1] += " (no such file)"
    for home in homes:
        root = env.get(home, "")
        out.looked.append(f"${home}" + (f"={root}" if root else " (unset)"))
        if root:
            hit = _in_dirs([os.path.join(root, "lib"), os.path.join(root, "lib64")], names)
            if hit:
                out.path = hit
                return out
    dirs = [os.path.join(r, d) for r in _wheel_roots() for d in wheel_dirs]
    existing = [d for d in dirs if os.path.isdir(d)]
    out.looked.append("the nvidia-* wheels (" + (", ".join(existing) if existing
                                                 else f"no {' or '.join(wheel_dirs)} on sys.path") + ")")
    hit = _in_dirs(existing, names)
    if hit:
        out.path = hit
        return out
    hit, where = _pathfinder(which)
    out.looked.append(where)
    if hit:
        out.path = hit
        return out
    out.looked.append("the system loader (LD_LIBRARY_PATH, ldconfig)")
    out.path = _system(names)
    return out


def locate(env=None):
    """Paths of (libcudart, libnccl), or `LibraryNotFound` naming what is missing."""
    found = {}
    for which, label, hint in (
            ("nccl", "libnccl.so.2", "pip install nvidia-nccl-cu12 or nvidia-nccl-cu13, "
                                     "or set NCCL_HOME"),
            ("cudart", "the CUDA runtime libcudart.so",
             "pip install nvidia-cuda-runtime-cu12 or install a CUDA toolkit, or set CUDA_HOME")):
        f = find(which, env)
        if not f.path:
            raise LibraryNotFound(f"--backend nccl: {label} not found; looked in: "
                                  + "; ".join(f.looked) + f". To get it: {hint}")
        found[which] = f.path
    return found["cudart"], found["nccl"]


def version_string(code):
    """NCCL's version code as text: 22809 -> '2.28.9' (2.8 and older: 2804)."""
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"
