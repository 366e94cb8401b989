"""The own algorithms of this folder, found by their modules (see the
package's docstring), and the facts every kernel shares."""
import importlib
import os
import pkgutil
from functools import lru_cache

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = __name__.rpartition(".")[0]
COMMON = "common.cuh"
# The element types and ops every kernel has (common.cuh's CCB_KERNELS).
ELEMENT_TYPES = ("fp32", "fp16", "bf16")
OPS = ("sum",)
# What a module on NCCL's device API says (``API = ...``: `_devapi` runs it).
DEVICE_API = "nccl-device"
# The phases of a peer-memory kernel timed alone (``NAME:PHASE``), with
# common.cuh's CCB_PHASES for each: the launch (and the call's bookkeeping),
# then its barriers too; the rest of the whole kernel's time is its data.
PHASES = {"launch": 0, "barrier": 1}


@lru_cache(maxsize=1)
def _modules():
    """Every algorithm module: {(collective, name): module}."""
    found = {}
    for info in pkgutil.iter_modules([HERE]):
        if info.name.startswith("_"):
            continue
        m = importlib.import_module(f"{PACKAGE}.{info.name}")
        found[(m.COLLECTIVE, m.NAME)] = m
    return found


def names_for(collective):
    """The own algorithms of `collective`, sorted by name."""
    return sorted(name for coll, name in _modules() if coll == collective)


def find(collective, name):
    """The module of algorithm `name` of `collective`, or None."""
    return _modules().get((collective, name))


def phase_algorithms(collective):
    """{``NAME:PHASE``: (NAME, PHASE)} of the peer-memory kernels of
    `collective` (the device-API kernels, nccl-tests' own, have none)."""
    return {f"{name}:{phase}": (name, phase) for name in names_for(collective)
            if not is_devapi(find(collective, name)) for phase in PHASES}


def is_devapi(module):
    return getattr(module, "API", "") == DEVICE_API


def all_algorithms():
    """[(collective, name, module)] of every own algorithm."""
    return [(c, n, m) for (c, n), m in sorted(_modules().items())]


def read(filename):
    with open(os.path.join(HERE, filename), encoding="utf-8") as f:
        return f.read()


def kernel_base(module):
    """The kernel's template name: its source file's stem (`SOURCE` may be a
    path: the doctor's SM kernels live beside the doctor)."""
    return os.path.splitext(os.path.basename(module.SOURCE))[0]


def kernel_name(module, dtype, wide=False):
    """The extern "C" entry of `module` for element type `dtype`; `wide`:
    the one moving 16 bytes a word (common.cuh's CCB_KERNELS)."""
    return f"{kernel_base(module)}_{dtype}" + ("_v" if wide else "")


WORD_BYTES = 16  # the wide entries' word
