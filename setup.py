"""Build the Cython engine in ext/ against the MPI of the ``MPICC`` wrapper
(default ``mpicc``): Open MPI's into ``ccbench_kit._engine``, an MPICH-family
MPI's (MPICH, Intel MPI, MVAPICH, Cray MPICH) into
``ccbench_kit._engine_mpich``, so that both builds live side by side in one
tree and each environment loads the one for the MPI its mpi4py loaded
(`ccbench_kit.backends.mpi.engine`)."""
import glob
import os
import shlex
import shutil
import subprocess

import mpi4py
import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.modified import newer_group


MPICC = os.environ.get("MPICC", "mpicc")


def _run(*args):
    return subprocess.run([*shlex.split(MPICC), *args], check=True, capture_output=True,
                          text=True).stdout


def mpicc_flags():
    """(family, include dirs, library dirs, libraries) of the MPICC wrapper:
    Open MPI answers ``--showme:...``, the MPICH family ``-show``."""
    try:
        return ("openmpi", [f[2:] if f.startswith("-I") else f
                            for f in shlex.split(_run("--showme:incdirs"))],
                shlex.split(_run("--showme:libdirs")), shlex.split(_run("--showme:libs")))
    except (OSError, subprocess.CalledProcessError):
        pass
    try:
        words = shlex.split(_run("-show"))
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit(f"{MPICC} (MPICC) not found or not an MPI compiler wrapper: install "
                         "Open MPI (apt-get install openmpi-bin libopenmpi-dev) or MPICH "
                         "(mpich libmpich-dev), or run `make setup [MPI=mpich]`") from e
    pick = lambda flag: [w[len(flag):] for w in words if w.startswith(flag) and len(w) > 2]  # noqa: E731
    return "mpich", pick("-I"), pick("-L"), pick("-l")


FAMILY, INCDIRS, LIBDIRS, LIBS = mpicc_flags()
# The engine's loops are built with -O3, unless CFLAGS names an optimisation
# level: ``CFLAGS="-O0 -g"`` for a debugger wins, as in any C build (setuptools
# puts CFLAGS before an extension's own flags, so -O3 there would override it).
OPT = [] if any(w.startswith("-O") for w in shlex.split(os.environ.get("CFLAGS", ""))) \
    else ["-O3"]
ENGINE = "ccbench_kit._engine" if FAMILY == "openmpi" else "ccbench_kit._engine_mpich"
ENGINE_PYX = "ext/_engine.pyx"
if FAMILY != "openmpi":
    # the same source under this build's module name (Cython names the init
    # function after the file); rewritten only when it changed
    os.makedirs("build/engine_mpich", exist_ok=True)
    ENGINE_PYX = "build/engine_mpich/_engine_mpich.pyx"
    with open("ext/_engine.pyx") as f:
        text = f.read()
    if not os.path.exists(ENGINE_PYX) or open(ENGINE_PYX).read() != text:
        with open(ENGINE_PYX, "w") as f:
            f.write(text)

# the list of collectives both extensions include (an X-macro; C and Python read it)
COLLECTIVES_DEF = "ccbench_kit/collectives/collectives.def"
# what the C sources include: a change to one rebuilds both extensions
HEADERS = sorted(glob.glob("ext/*.h"))

engine = Extension(
    ENGINE,
    sources=[ENGINE_PYX] + sorted(c for c in glob.glob("ext/*.c")
                                  if not os.path.basename(c).startswith(("_", "nccl_"))),
    include_dirs=["ext", os.path.dirname(COLLECTIVES_DEF), mpi4py.get_include(),
                  numpy.get_include()] + INCDIRS,
    depends=[COLLECTIVES_DEF, *HEADERS],
    library_dirs=LIBDIRS,
    libraries=LIBS,
    extra_compile_args=[*OPT, "-std=c11", "-Wall", "-Wno-unused-function"],
    define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
)

# The NCCL backend's loop: no CUDA/NCCL headers or libraries at build time
# (ext/nccl_api.h declares what it uses; both are dlopen'ed at run time).
nccl = Extension(
    "ccbench_kit._nccl",
    sources=["ext/_nccl.pyx"] + sorted(glob.glob("ext/nccl_*.c")),
    include_dirs=["ext", os.path.dirname(COLLECTIVES_DEF), numpy.get_include()],
    depends=[COLLECTIVES_DEF, *HEADERS],
    libraries=["dl"],
    extra_compile_args=[*OPT, "-std=c11", "-Wall", "-Wno-unused-function"],
    define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
)


class BuildExt(build_ext):
    """An editable install (``pip install -e .``, ``uv pip install -e .``)
    builds into a new temporary folder every time, so it compiled the engine
    again (30 s on 2 cores) although ``make`` had just built it in place from
    the same sources.  In editable mode the module in the tree is the one
    installed, so one at least as new as its sources and headers is kept.
    Any other build (a wheel, ``build_ext --force``) compiles as usual: its
    flags may differ from the tree's."""

    def build_extension(self, ext):
        built = self.get_ext_fullpath(ext.name)
        in_tree = os.path.join(*ext.name.split(".")[:-1], os.path.basename(built))
        if (self.editable_mode and not self.force and os.path.exists(in_tree)
                and not newer_group([*ext.sources, *ext.depends], in_tree)):
            os.makedirs(os.path.dirname(built), exist_ok=True)
            shutil.copy2(in_tree, built)  # build_ext copies it back into the tree
            return
        super().build_extension(ext)


setup(ext_modules=cythonize([engine, nccl], language_level=3, quiet=True, include_path=["ext"]),
      cmdclass={"build_ext": BuildExt})
