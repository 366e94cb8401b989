"""Compiling the own kernels with NVRTC, and the cache of what it made.

NVRTC is opened with ctypes, found as `nccl_lib` finds the CUDA runtime
(``CCB_NVRTC_LIBRARY``, ``CUDA_HOME``, the ``nvidia-cuda-nvrtc`` wheel, the
system loader).  ctypes, not NVIDIA's cuda-bindings: six C calls need no
package beyond the 60 MB wheel of the library itself, whose ABI is stable
across CUDA 12 and 13, and the launch has to be in the C timed loop anyway
(``ext/nccl_loop.c``), where a Python binding could not help.

Images are cached under ``$CCB_KERNEL_CACHE`` or the user's cache folder
(``$XDG_CACHE_HOME`` or ``~/.cache``)``/ccbench_kit/gpu_kernels``, one file
per source, target and NVRTC version: ``<sha256>-sm_90.cubin``.  The
hash covers the kernel's source, common.cuh and the options, so an edited
kernel compiles anew; files are written whole (rename), so ranks of one
host compiling at once never read half a file.
"""
import ctypes
import hashlib
import os
import tempfile

from ...errors import CCBenchError
from .. import nccl_lib
from ._registry import COMMON, PHASES, kernel_base, read

OPTIONS = ("-std=c++17", "-default-device")


class NvrtcError(CCBenchError):
    """NVRTC is missing, or a kernel failed to compile (the log's first error)."""


def load(env=None):
    """NVRTC through ctypes, or `NvrtcError` naming every place looked in."""
    found = nccl_lib.find("nvrtc", env)
    if not found.path:
        raise NvrtcError("NVRTC (libnvrtc.so) not found; looked in: " + "; ".join(found.looked)
                         + ". To get it: pip install nvidia-cuda-nvrtc, or set CUDA_HOME")
    try:
        return Nvrtc(found.path)
    except OSError as e:
        raise NvrtcError(f"cannot load NVRTC {found.path}: {e}") from None


class Nvrtc:
    """The few NVRTC calls compiling takes."""

    def __init__(self, path):
        self.path = path
        self._lib = lib = ctypes.CDLL(path)
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        lib.nvrtcCreateProgram.argtypes = [
            ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int,
            ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_char_p)]
        lib.nvrtcCompileProgram.argtypes = [ctypes.c_void_p, ctypes.c_int,
                                            ctypes.POINTER(ctypes.c_char_p)]
        for fn in ("nvrtcGetProgramLogSize", "nvrtcGetPTXSize", "nvrtcGetCUBINSize"):
            getattr(lib, fn).argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
        for fn in ("nvrtcGetProgramLog", "nvrtcGetPTX", "nvrtcGetCUBIN"):
            getattr(lib, fn).argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        lib.nvrtcDestroyProgram.argtypes = [ctypes.POINTER(ctypes.c_void_p)]

    def version(self):
        major, minor = ctypes.c_int(), ctypes.c_int()
        self._check(self._lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
        return major.value, minor.value

    def _check(self, rc, what):
        if rc:
            raise NvrtcError(f"{what}: {self._lib.nvrtcGetErrorString(rc).decode()}")

    def compile(self, source, name, headers, target, options=()):
        """Compile `source` (with in-memory `headers`, {name: text}) for
        `target` (``sm_90``: a cubin; ``compute_90``: PTX), with `options`
        beside the kit's; returns the image's bytes, or `NvrtcError` with the
        first error of NVRTC's log."""
        lib, prog = self._lib, ctypes.c_void_p()
        hnames = list(headers)
        htexts = (ctypes.c_char_p * len(hnames))(*(headers[h].encode() for h in hnames))
        hincl = (ctypes.c_char_p * len(hnames))(*(h.encode() for h in hnames))
        self._check(lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(),
                                           len(hnames), htexts, hincl), "nvrtcCreateProgram")
        try:
            opts = [f"--gpu-architecture={target}", *OPTIONS, *options]
            copts = (ctypes.c_char_p * len(opts))(*(o.encode() for o in opts))
            rc = lib.nvrtcCompileProgram(prog, len(opts), copts)
            if rc:
                raise NvrtcError(f"{name} does not compile for {target}: "
                                 + first_error(self._log(prog)))
            cubin = target.startswith("sm_")
            size = ctypes.c_size_t()
            get_size, get = ((lib.nvrtcGetCUBINSize, lib.nvrtcGetCUBIN) if cubin
                             else (lib.nvrtcGetPTXSize, lib.nvrtcGetPTX))
            self._check(get_size(prog, ctypes.byref(size)), "nvrtcGet*Size")
            buf = ctypes.create_string_buffer(size.value)
            self._check(get(prog, buf), "nvrtcGet*")
            return buf.raw
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(prog))

    def _log(self, prog):
        size = ctypes.c_size_t()
        self._lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(max(size.value, 1))
        self._lib.nvrtcGetProgramLog(prog, buf)
        return buf.value.decode(errors="replace")


def first_error(log):
    """The first line of a compiler log that says "error", else its first line."""
    lines = [l.strip() for l in log.splitlines() if l.strip()]
    for line in lines:
        if "error" in line:
            return line
    return lines[0] if lines else "(no log)"


def cache_dir(env=None):
    env = os.environ if env is None else env
    if env.get("CCB_KERNEL_CACHE"):
        return env["CCB_KERNEL_CACHE"]
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "ccbench_kit", "gpu_kernels")


def image(nvrtc, module, target, folder=None, phase=""):
    """The compiled image of `module`'s kernels for `target`, from the cache
    when it has it; (bytes, path of the cached file).  `phase` (one of
    `PHASES`): the kernels doing that phase alone (common.cuh)."""
    source, common = read(module.SOURCE), read(COMMON)
    options = [f"-DCCB_PHASES={PHASES[phase]}"] if phase else []
    key = hashlib.sha256("\0".join([source, common, " ".join(OPTIONS + tuple(options)), target,
                                    "%d.%d" % nvrtc.version()]).encode()).hexdigest()[:24]
    folder = folder or cache_dir()
    ext = "cubin" if target.startswith("sm_") else "ptx"
    stem = kernel_base(module) + (f"-{phase}" if phase else "")
    path = os.path.join(folder, f"{stem}-{key}-{target}.{ext}")
    try:
        with open(path, "rb") as f:
            return f.read(), path
    except OSError:
        pass
    data = nvrtc.compile(source, module.SOURCE, {COMMON: common}, target, options)
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".part-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        pass  # an unwritable cache costs a compile per run, nothing more
    return data, path
