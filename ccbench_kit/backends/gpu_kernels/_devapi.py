"""Kernels on NCCL's device API (nccl-tests' ``-D 1|2``), for one nccl backend.

Their modules say ``API = "nccl-device"``; they take symmetric windows (the
run's ``-R 2`` buffers) and a device communicator (``ncclDevCommCreate``,
one LSA barrier a block) instead of the peer-memory kernels' staging
buffers, so they get their own host side here, the same interface as
`_peers.PeerKernels` (``refusal``, ``calls``, ``close``).

nvcc compiles them, not NVRTC: NCCL's device headers include CCCL's
``cuda/atomic``, which the NVRTC wheel does not carry.  Two products, cached
as NVRTC's images are (``_nvrtc.cache_dir``), keyed by the sources, the NCCL
headers' version, nvcc's version and the GPU target: the kernels' cubin
(loaded with the driver API and launched by the C timed loop, as every own
kernel) and ``devapi_host.cpp`` as a small shared object that fills the
kernels' argument and asks NCCL for the device communicator with the same
headers, so no layout is written twice.  Everything here is collective over
the job's communicator and every refusal is agreed, as in `_peers`.
"""
import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile

from ...errors import CCBenchError
from ..nccl_lib import version_string
from ._nvrtc import cache_dir, first_error
from ._peers import agree
from ._registry import ELEMENT_TYPES, HERE, OPS, kernel_name, read

SINCE_NCCL = 22800          # ncclDevCommCreate and nccl_device.h came with NCCL 2.28
THREADS = 512               # nccl-tests' block; devapi.cuh's __launch_bounds__
HEADERS = ("devapi.cuh", "common.cuh")
HOST_SOURCE = "devapi_host.cpp"
OPTIONS = ("-std=c++17", "-O3")
COMPILE_SECONDS = 300
FALLBACK_NVCC = "/usr/local/cuda/bin/nvcc"  # CUDA's default install, where the search ends


class DevApiError(CCBenchError):
    """nvcc or NCCL's device headers missing, or a compile that failed."""


def find_nvcc(env=None):
    """nvcc's path, or `DevApiError` naming the places looked in."""
    env = os.environ if env is None else env
    looked = []
    if env.get("CCB_NVCC"):
        looked.append(f"$CCB_NVCC={env['CCB_NVCC']}")
        if os.access(env["CCB_NVCC"], os.X_OK):
            return env["CCB_NVCC"]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(var):
            path = os.path.join(env[var], "bin", "nvcc")
            looked.append(path)
            if os.access(path, os.X_OK):
                return path
    on_path = shutil.which("nvcc", path=env.get("PATH", os.defpath))
    looked.append("PATH")
    if on_path:
        return on_path
    looked.append(FALLBACK_NVCC)
    if os.access(FALLBACK_NVCC, os.X_OK):
        return FALLBACK_NVCC
    raise DevApiError("nvcc not found (NCCL's device headers need CCCL, which NVRTC lacks); "
                      "looked in: " + "; ".join(looked) + ". Install a CUDA toolkit or set "
                      "CUDA_HOME")


def header_version(folder):
    """NCCL_VERSION_CODE of `folder`/nccl.h, or 0."""
    try:
        with open(os.path.join(folder, "nccl.h"), encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.split()
                if parts[:2] == ["#define", "NCCL_VERSION_CODE"] and len(parts) > 2:
                    return int(parts[2]) if parts[2].isdigit() else 0
    except OSError:
        pass
    return 0


def find_headers(nccl_library, version, env=None):
    """The folder holding nccl_device.h of the loaded NCCL (version
    `version`): ``$CCB_NCCL_INCLUDE``, ``$NCCL_HOME/include``, the
    library's own ``../include`` (the nvidia-nccl wheel), the system's; or
    `DevApiError` saying where it looked and what it found."""
    env = os.environ if env is None else env
    candidates = []
    if env.get("CCB_NCCL_INCLUDE"):
        candidates.append(env["CCB_NCCL_INCLUDE"])
    if env.get("NCCL_HOME"):
        candidates.append(os.path.join(env["NCCL_HOME"], "include"))
    real = os.path.realpath(nccl_library) if nccl_library else ""
    if real:
        candidates.append(os.path.join(os.path.dirname(os.path.dirname(real)), "include"))
    candidates += ["/usr/include", "/usr/local/include"]
    candidates = list(dict.fromkeys(os.path.normpath(c) for c in candidates))
    others = []
    for folder in candidates:
        if not os.path.isfile(os.path.join(folder, "nccl_device.h")):
            continue
        found = header_version(folder)
        if found == version:
            return folder
        others.append(f"{folder} (NCCL {version_string(found)})")
    if others:
        raise DevApiError(f"NCCL's device headers found are not the loaded NCCL "
                          f"{version_string(version)}'s: " + "; ".join(others)
                          + ". Set CCB_NCCL_INCLUDE to its include folder")
    raise DevApiError("NCCL's device headers (nccl_device.h) not found; looked in: "
                      + "; ".join(candidates) + ". Set CCB_NCCL_INCLUDE to the include folder "
                      f"of NCCL {version_string(version)}")


@functools.lru_cache(maxsize=None)
def _nvcc_version(nvcc):
    """nvcc's version line (a cache key): asked once a process, not once a build."""
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else "?"


def _compile(nvcc, args, what):
    try:
        proc = subprocess.run([nvcc, *args], capture_output=True, text=True,
                              timeout=COMPILE_SECONDS)
    except subprocess.TimeoutExpired:
        raise DevApiError(f"{what}: nvcc ran past {COMPILE_SECONDS} s") from None
    if proc.returncode:
        raise DevApiError(f"{what} does not compile: "
                          + first_error(proc.stderr + proc.stdout))


def build(nvcc, include, source, target, folder=None, host=False):
    """The path of `source` compiled for `target` (``sm_90``): a cubin, or
    with `host` the shared object of `source` (host code only), from the
    cache when it has it.  Files are written whole (rename), so ranks of
    one host building at once never read half a file."""
    texts = [read(source)] + [read(h) for h in HEADERS]
    key = hashlib.sha256("\0".join(texts + [" ".join(OPTIONS), target, str(header_version(include)),
                                            _nvcc_version(nvcc), str(host)]).encode())
    folder = folder or cache_dir()
    stem = os.path.splitext(source)[0]
    path = os.path.join(folder, f"{stem}-{key.hexdigest()[:24]}-{target}."
                                + ("so" if host else "cubin"))
    if os.path.isfile(path):
        return path
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".part-")
    os.close(fd)
    try:
        mode = (["-shared", "-Xcompiler", "-fPIC", "--cudart", "none"] if host
                else ["-cubin", f"-arch={target}"])
        _compile(nvcc, [*mode, *OPTIONS, "-I", include, "-I", HERE, "-o", tmp,
                        os.path.join(HERE, source)], source)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


class _Host:
    """devapi_host.cpp's functions, and NCCL's two it calls."""

    def __init__(self, path, nccl_library):
        lib = ctypes.CDLL(path)
        for fn in ("ccbd_devcomm_bytes", "ccbd_args_bytes"):
            getattr(lib, fn).restype = ctypes.c_size_t
        vp, sz = ctypes.c_void_p, ctypes.c_size_t
        lib.ccbd_devcomm_create.argtypes = [vp, vp, ctypes.c_int, vp,
                                            ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)]
        lib.ccbd_devcomm_destroy.argtypes = [vp, vp, vp]
        lib.ccbd_args.argtypes = [vp, vp, vp, sz, vp, sz, sz]
        self.lib = lib
        # the library the kit loaded (dlopen of the same path: the same copy)
        nccl = ctypes.CDLL(nccl_library)
        self.create = ctypes.cast(nccl.ncclDevCommCreate, vp).value
        self.destroy = ctypes.cast(nccl.ncclDevCommDestroy, vp).value
        self.devcomm_bytes = lib.ccbd_devcomm_bytes()
        self.args_bytes = lib.ccbd_args_bytes()

    def devcomm(self, comm, barriers):
        """(devComm bytes, nRanks, lsaSize) or raises DevApiError."""
        out = ctypes.create_string_buffer(self.devcomm_bytes)
        nranks, lsa = ctypes.c_int(), ctypes.c_int()
        rc = self.lib.ccbd_devcomm_create(self.create, comm, barriers, out, ctypes.byref(nranks),
                                          ctypes.byref(lsa))
        if rc:
            raise DevApiError(f"ncclDevCommCreate failed (ncclResult_t {rc})")
        return out, nranks.value, lsa.value

    def free(self, comm, devcomm):
        self.lib.ccbd_devcomm_destroy(self.destroy, comm, devcomm)

    def args(self, devcomm, send, send_offset, recv, recv_offset, count):
        out = ctypes.create_string_buffer(self.args_bytes)
        self.lib.ccbd_args(out, devcomm, send, send_offset, recv, recv_offset, count)
        return out.raw


class DevApiKernels:
    """The device-API kernels of one backend: compiled code, the device
    communicator, calls.

    Parameters
    ----------
    lib : ccbench_kit._nccl.Library
    comm : mpi4py communicator of the collectives
    device : int
        This rank's GPU (current).
    nccl_library : str
        The path of the libnccl the backend loaded.
    version : int
        Its version code.
    ctas : int
        Blocks a call (nccl-tests' ``-V``): one LSA barrier each.
    """

    def __init__(self, lib, comm, device, nccl_library, version, ctas):
        self.lib, self.comm, self.device = lib, comm, device
        self.nccl_library, self.version, self.ctas = nccl_library, version, ctas
        self.rank, self.nranks = comm.Get_rank(), comm.Get_size()
        self._setup = None     # "" when compiled and loaded, else why not (agreed)
        self._host = None
        self._modules = {}     # source -> module handle
        self._refused = {}     # source -> why its kernels can't load ("" when they did), agreed
        self._functions = {}
        self._devcomms = {}    # NCCL communicator -> devComm bytes, or why not (agreed)
        self.target = ""
        self.built = {}        # source -> the cached file it was loaded from

    def _agree(self, reason):
        return agree(self.comm, reason)

    def refusal(self, module, dtype, op, windows, nccl_comm):
        """Why `module` can't run here ("" when it can); collective.
        `windows`: whether the buffers are symmetric windows (-R 2)."""
        if dtype not in ELEMENT_TYPES:
            return f"{module.NAME} has {', '.join(ELEMENT_TYPES)} kernels, not {dtype}"
        if op not in OPS:
            return f"{module.NAME} has {', '.join(OPS)} kernels, not {op}"
        if not windows:
            return (f"{module.NAME} runs on symmetric windows: add -R 2 (as nccl-tests' -D "
                    f"{module.DEVICE_IMPLEMENTATION})")
        if self._setup is None:
            self._setup = self._agree(self._prepare())
        if self._setup:
            return self._setup
        if module.SOURCE not in self._refused:
            self._refused[module.SOURCE] = self._agree(self._load(module))
            if self._refused[module.SOURCE] and module.SOURCE in self._modules:
                self.lib.module_unload(self._modules.pop(module.SOURCE))  # a peer failed
        if self._refused[module.SOURCE]:
            return self._refused[module.SOURCE]
        if nccl_comm not in self._devcomms:
            self._devcomms[nccl_comm] = self._devcomm(nccl_comm)
        held = self._devcomms[nccl_comm]
        return held if isinstance(held, str) else ""

    def _prepare(self):
        """This rank's reason it can't build or load the kernels ("" if none)."""
        if self.version < SINCE_NCCL:
            return (f"NCCL {version_string(self.version)} has no device API (ncclDevCommCreate): "
                    f"it needs NCCL {version_string(SINCE_NCCL)} or later")
        try:
            major, minor = self.lib.compute_capability(self.device)
            self.target = f"sm_{major}{minor}"
            self._nvcc = find_nvcc()
            self._include = find_headers(self.nccl_library, self.version)
            path = build(self._nvcc, self._include, HOST_SOURCE, "host", host=True)
            self._host = _Host(path, self.nccl_library)
        except (DevApiError, OSError, AttributeError, subprocess.SubprocessError) as e:
            return str(e)
        except Exception as e:  # a CUDA error asking about the GPU: this rank's reason
            return f"the GPU could not be queried: {e}"
        return ""

    def _load(self, module):
        try:
            path = build(self._nvcc, self._include, module.SOURCE, self.target)
            with open(path, "rb") as f:
                handle = self.lib.module_load(f.read())
            self._modules[module.SOURCE] = handle
            self.built[module.SOURCE] = path
            for dt in ELEMENT_TYPES:
                name = kernel_name(module, dt)
                self._functions[name] = self.lib.module_function(handle, name)
        except Exception as e:  # a compile error, a driver refusing the image
            return f"{module.NAME}: {e}"
        return ""

    def _devcomm(self, nccl_comm):
        reason, held = "", None
        try:
            held, nranks, lsa = self._host.devcomm(nccl_comm, self.ctas)
            if lsa != nranks:
                reason = (f"only {lsa} of the {nranks} ranks share load/store memory (one LSA "
                          "team): the device-API kernels need every rank's GPU in reach")
        except DevApiError as e:
            reason = str(e)
        reason = self._agree(reason)
        if reason:
            if held is not None:
                self._host.free(nccl_comm, held)
            return reason
        return held

    def calls(self, module, dtype, base_calls, windows, nccl_comm):
        """`base_calls` with `module`'s kernel for `dtype` and, per call,
        its (send window, send offset, receive window, receive offset) in
        `windows`; and what it launches (text)."""
        name = kernel_name(module, dtype.name)
        func, devcomm = self._functions[name], self._devcomms[nccl_comm]
        out = []
        for d, (sw, so, rw, ro) in zip(base_calls, windows):
            arg = self._host.args(devcomm, sw, so, rw, ro, d["count"])
            out.append(dict(d, kernel=(func, self.ctas, THREADS, arg)))
        return out, f"{name} {self.ctas}x{THREADS}"

    def close(self):
        for comm, held in list(self._devcomms.items()):
            if not isinstance(held, str):
                try:
                    self._host.free(comm, held)
                except Exception:  # at exit NCCL may be gone already
                    pass
        self._devcomms.clear()
        for m in self._modules.values():
            if not isinstance(m, str) and m:
                try:
                    self.lib.module_unload(m)
                except Exception:  # at exit the context may be gone already
                    pass
        self._modules.clear()
