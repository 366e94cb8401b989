"""Build the Cython engine in ext/ into ccbench_kit._engine, against the
system's Open MPI (found through `mpicc --showme`)."""
import glob
import os
import shlex
import subprocess

import mpi4py
import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup


def mpicc_flags(what):
    try:
        out = subprocess.run(["mpicc", f"--showme:{what}"], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit("mpicc not found: install Open MPI (apt-get install "
                         "openmpi-bin libopenmpi-dev) or run `make setup`") from e
    return shlex.split(out)


engine = Extension(
    "ccbench_kit._engine",
    sources=["ext/_engine.pyx"] + sorted(c for c in glob.glob("ext/*.c")
                                          if not os.path.basename(c).startswith(("_", "nccl_"))),
    include_dirs=["ext", mpi4py.get_include(), numpy.get_include()]
    + [f[2:] if f.startswith("-I") else f for f in mpicc_flags("incdirs")],
    library_dirs=mpicc_flags("libdirs"),
    libraries=mpicc_flags("libs"),
    extra_compile_args=["-O3", "-std=c11", "-Wall", "-Wno-unused-function"],
    define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
)

# The NCCL backend's loop: no CUDA/NCCL headers or libraries at build time
# (ext/nccl_api.h declares what it uses; both are dlopen'ed at run time).
nccl = Extension(
    "ccbench_kit._nccl",
    sources=["ext/_nccl.pyx"] + sorted(glob.glob("ext/nccl_*.c")),
    include_dirs=["ext", numpy.get_include()],
    libraries=["dl"],
    extra_compile_args=["-O3", "-std=c11", "-Wall", "-Wno-unused-function"],
    define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
)

setup(ext_modules=cythonize([engine, nccl], language_level=3, quiet=True))
