# Two commands do everything on a fresh Debian machine:
#   make demo   set up, then run a local benchmark and write its report
#   make test   set up, then run every test
# Set-up installs only what is missing, so a warm machine skips it.
# MPI=mpich builds against Debian's MPICH instead of Open MPI, into .venv-mpich
# (the Open MPI build in .venv is left as it is); MPICC=/path/to/mpicc builds
# against a site's MPI (an MPICH-family one with MPI=mpich).
SHELL := /bin/bash
PYTHON ?= python3
MPI ?= openmpi
EXT_SUFFIX := $(shell $(PYTHON) -c "import sysconfig;print(sysconfig.get_config_var('EXT_SUFFIX'))")
ifeq ($(MPI),mpich)
VENV ?= .venv-mpich
MPICC ?= mpicc.mpich
MPI_PACKAGES := mpich libmpich-dev
ENGINE := ccbench_kit/_engine_mpich$(EXT_SUFFIX)
# mpi4py's wheel for the MPICH ABI links libmpi.so.12; Debian names MPICH's
# library libmpich.so.12.  A one-line library of that name in the venv, which
# mpi4py finds there, loads it.
LIBMPI_SHIM := $(VENV)/lib/libmpi.so.12
# MPICH busy-polls: oversubscribed, a call takes milliseconds (4-20 ms on 2
# cores), so its tests are what differs between the MPIs: the engine against
# numpy, MPICH's own (Hydra, the library recorded, the ABI check), the CLI's
# table and a run under the user's own mpiexec, and every collective and
# algorithm against numpy at 3 ranks (uneven splits); Open MPI runs the rest
TESTS ?= tests/test_spine_engine.py tests/test_mpich.py \
  tests/test_spine_run.py::test_cli_table_has_zero_wrong_on_every_row \
  tests/test_spine_run.py::test_in_process_under_users_mpirun \
  'tests/test_engine_collectives.py::test_every_algorithm_matches_numpy[3]'

else ifeq ($(MPI),openmpi)
VENV ?= .venv
MPICC ?= mpicc
MPI_PACKAGES := openmpi-bin libopenmpi-dev
ENGINE := ccbench_kit/_engine$(EXT_SUFFIX)
LIBMPI_SHIM :=
TESTS ?= tests
else
$(error MPI=$(MPI): use MPI=openmpi (the default) or MPI=mpich)
endif
export MPICC
MPICH_MPICC ?= mpicc.mpich
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
APT_PACKAGES := $(MPI_PACKAGES) chromium iproute2
# the cluster testbed (testbed/): a real Slurm, munge, nftables for lossy links;
# installed without recommends (no systemd, no mail server)
APT_SLIM := slurmctld slurmd slurm-client munge nftables
export OMPI_ALLOW_RUN_AS_ROOT := 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM := 1
export PYTHONUNBUFFERED := 1

.PHONY: setup apt venv build bytecode kernel nccl-headers demo cluster-demo cluster-doctor test test-mpich test-fast bench clean

setup: apt $(VENV)/.deps $(LIBMPI_SHIM) build bytecode kernel

apt:
	@missing=""; slim=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	for p in $(APT_SLIM); do dpkg -s $$p >/dev/null 2>&1 || slim="$$slim $$p"; done; \
	if [ -n "$$missing$$slim" ]; then \
	  echo "installing:$$missing$$slim"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq; \
	  if [ -n "$$missing" ]; then DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null || exit 1; fi; \
	  if [ -n "$$slim" ]; then DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$slim >/dev/null || exit 1; fi; \
	fi

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

# The packages are installed by uv (from PyPI, as pip would): in parallel and
# with bytecode compiled as pip does, the whole set took 36 s where pip took
# about 115 s (most of `make test`'s set-up; bench/setup_time.py: make setup
# 91 s against 176 s).  The engine compiles (~30 s of CPU) meanwhile; the
# editable install then keeps that build (setup.py's BuildExt).
# torch (the torch backend's tests) at this exact pin: the CPU build that
# pip's find-links hold (/opt/wheels here), which uv is told of as pip's
# configuration does not reach it; a range could pull a CUDA build of GBs.
# Its bytecode is what importing it writes, not all of it: torch, sympy and
# networkx hold 4,400 modules (21 s of CPU to compile) of which an import
# loads 700 and sympy's none.
UV_VERSION := 0.13.9
BUILD_EXT = $(PY) setup.py -q build_ext --inplace -j 2
UV_PLAIN = $(VENV)/bin/uv pip install -q --python $(PY)
UV_INSTALL = $(UV_PLAIN) --compile-bytecode
$(VENV)/.deps: pyproject.toml | $(VENV)/bin/python $(LIBMPI_SHIM)
	$(PIP) install -q "uv==$(UV_VERSION)"
	$(UV_INSTALL) -U pip "setuptools>=77" wheel Cython numpy mpi4py
	@links=$${PIP_FIND_LINKS:-$$($(PIP) config get global.find-links 2>/dev/null)}; \
	torch_from=$$(for d in $$links; do printf -- '--find-links %s ' "$$d"; done); \
	echo "$(BUILD_EXT) &"; $(BUILD_EXT) & build=$$!; \
	echo "$(UV_INSTALL) -r pyproject.toml --extra all; $(UV_PLAIN) $$torch_from torch==2.13.0"; \
	$(UV_INSTALL) -r pyproject.toml --extra all && $(UV_PLAIN) $$torch_from torch==2.13.0 && \
	env -u PYTHONDONTWRITEBYTECODE $(PY) -c "import torch"; \
	installed=$$?; wait $$build && exit $$installed
	$(UV_INSTALL) --no-deps --no-build-isolation -e .
	touch $@

build: $(ENGINE)

$(ENGINE): $(wildcard ext/*.c ext/*.h ext/*.pyx) ccbench_kit/collectives/collectives.def setup.py | $(VENV)/.deps $(LIBMPI_SHIM)
	$(BUILD_EXT)

# Every command and every rank is a new Python process that imports the kit:
# without its compiled bytecode each one compiles ~150 modules first (0.6 s of
# CPU a rank, half a launch's start-up on 2 cores).  Where the environment says
# PYTHONDONTWRITEBYTECODE (as CI and sandboxes often do) Python never writes
# it, so it is written here, for what changed since the last time.
bytecode: | $(VENV)/.deps
	@$(PY) -m compileall -q -j 0 ccbench_kit testbed >/dev/null

$(VENV)/lib/libmpi.so.12: | $(VENV)/bin/python
	libs=$$($(MPICC) -show | tr ' ' '\n' | grep -E '^-[Ll]' | tr '\n' ' '); \
	cc -shared -o $@ -Wl,-soname,libmpi.so.12 -Wl,--no-as-needed $$libs

kernel: $(VENV)/share/jupyter/kernels/ccbench/kernel.json

# NCCL's device headers, for the test that compiles the device-API kernels
# (nccl-tests' -D) with nvcc where nvcc is found: the include folder of the
# nvidia-nccl wheel the GPU machines carry (the wheel itself is not installed:
# its libnccl would make this CPU machine look like a GPU one).  Offline, or
# without nvcc, the test says why it skips.
NCCL_HEADERS_WHEEL := nvidia-nccl-cu13==2.28.9
NCCL_INCLUDE := $(VENV)/nccl-include
export CCB_NCCL_INCLUDE := $(abspath $(NCCL_INCLUDE))
nccl-headers: | $(VENV)/.deps
	@if [ ! -f $(NCCL_INCLUDE)/nccl_device.h ] && command -v nvcc >/dev/null; then \
	  tmp=$$(mktemp -d) && \
	  if $(PIP) download -q --no-deps --only-binary :all: -d $$tmp "$(NCCL_HEADERS_WHEEL)"; then \
	    $(PY) tests/nccl_headers.py $$tmp/*.whl $(NCCL_INCLUDE); \
	  else echo "nccl-headers: $(NCCL_HEADERS_WHEEL) could not be downloaded; the nvcc test will skip"; fi; \
	  rm -rf $$tmp; \
	fi

$(VENV)/share/jupyter/kernels/ccbench/kernel.json: | $(VENV)/.deps
	$(PY) -m ipykernel install --sys-prefix --name ccbench --display-name "Python (ccbench)" >/dev/null

# Ranks: no more than this machine's cores (at least 2): more ranks than cores
# share them, and the times would measure the scheduler, not the collective.
DEMO_RANKS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ $$n -gt 4 ] && n=4; [ $$n -lt 2 ] && n=2; echo $$n)

demo: setup
	$(VENV)/bin/ccbench run all_reduce,all_gather -r $(DEMO_RANKS) -b 8 -e 64M -f 2 \
	  --algorithms ring,mpi --check --out results/demo.nc
	$(VENV)/bin/ccbench report results/demo.nc -o reports/demo.html --title "ccbench demo"
	$(VENV)/bin/ccbench history add --history results/history results/demo.nc
	$(VENV)/bin/ccbench history show --history results/history 'all_reduce/ring/out_of_place/671*/*'
	@echo; echo "results: $(CURDIR)/results/demo.nc"; echo "report:  $(CURDIR)/reports/demo.html"

# the health check on the testbed: FAULT=KIND:NODE (slow-link, congested-link,
# cpu-contended, stopped, lossy-link; e.g. FAULT=slow-link:node3) or empty for
# a clean fabric; the last line printed is the verdict. DOCTOR_ARGS: more
# arguments for ccbench doctor, e.g. DOCTOR_ARGS="--backend tcp --repeats 3"
FAULT ?=
DOCTOR_ARGS ?=
cluster-doctor: setup
	@$(PY) bench/cluster_doctor.py --fault "$(FAULT)" --doctor-args="$(DOCTOR_ARGS)"

# a 4-node Slurm cluster on this machine (testbed/, needs root): a suite of
# sbatch jobs, the topology comparison and a report; torn down at the end
cluster-demo: setup
	$(PY) testbed/demo.py

# Two phases.  First every test but a few, TEST_WORKERS at a time (pytest-xdist;
# a whole module to a worker, so that its module fixtures (a Slurm testbed, a
# rendered report) are made once; modules with slow tests first: conftest.py):
# a test spends much of its time starting processes and waiting for them, and 2
# cores do more than one test at a time: nproc + 2 workers keep the cores busy
# while tests wait (on 2 cores, phase 1 took 592 s with 4 workers and 661 s
# with 3 in one hour; 901 and 933 s in another).
# Then, alone, the tests marked `measures` (a rate against a shaped link, which
# a crowded machine would change).  The fifteen slowest tests close each
# phase's log: where the suite's time goes.  Both under tests/without-dns: no
# DNS query leaves the machine (tests give made-up host names).
# PYTHONDONTWRITEBYTECODE (as CI and sandboxes set it) is left out of the
# suite's environment: pytest then keeps the test modules it rewrote for its
# asserts, where each worker would otherwise rewrite all of them again (7 s of
# CPU a worker), as `make bytecode` keeps the kit's compiled modules.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); n=$$((n + 2)); [ $$n -gt 8 ] && n=8; echo $$n)
test: setup nccl-headers
	env -u PYTHONDONTWRITEBYTECODE tests/without-dns $(VENV)/bin/pytest -q -ra --durations=15 \
	  -n $(TEST_WORKERS) --dist loadfile -m "not measures" $(TESTS)
	env -u PYTHONDONTWRITEBYTECODE tests/without-dns $(VENV)/bin/pytest -q -ra --durations=5 \
	  -m measures $(TESTS) || [ $$? = 5 ]  # 5: none selected

# the same kit built against MPICH, and what differs between the MPIs (TESTS
# above); apart from `make test` to keep that within 15 minutes on 2 cores;
# CI (.ci/run) runs both
test-mpich:
	$(MAKE) --no-print-directory test MPI=mpich MPICC=$(MPICH_MPICC) VENV=.venv-mpich

bench: setup
	$(PY) bench/overhead.py

clean:
	rm -rf build ext/_engine.c ccbench_kit/*.so *.egg-info
