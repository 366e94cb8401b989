# Two commands do everything on a fresh Debian machine:
#   make demo   set up, then run a local benchmark and write its report
#   make test   set up, then run every test
# Set-up installs only what is missing, so a warm machine skips it.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
APT_PACKAGES := openmpi-bin libopenmpi-dev chromium iproute2
# the cluster testbed (testbed/): a real Slurm, munge, nftables for lossy links;
# installed without recommends (no systemd, no mail server)
APT_SLIM := slurmctld slurmd slurm-client munge nftables
ENGINE := ccbench_kit/_engine$(shell $(PYTHON) -c "import sysconfig;print(sysconfig.get_config_var('EXT_SUFFIX'))")
export OMPI_ALLOW_RUN_AS_ROOT := 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM := 1
export PYTHONUNBUFFERED := 1

.PHONY: setup apt venv build kernel demo cluster-demo test test-fast bench clean

setup: apt $(VENV)/.deps build kernel

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

$(VENV)/.deps: pyproject.toml | $(VENV)/bin/python
	$(PIP) install -q -U pip "setuptools>=69" wheel
	$(PIP) install -q Cython numpy mpi4py
	$(PIP) install -q -e ".[all]" --no-build-isolation
	touch $@

build: $(ENGINE)

$(ENGINE): $(wildcard ext/*.c ext/*.h ext/*.pyx) setup.py | $(VENV)/.deps
	$(PY) setup.py -q build_ext --inplace -j 2

kernel: $(VENV)/share/jupyter/kernels/ccbench/kernel.json

$(VENV)/share/jupyter/kernels/ccbench/kernel.json: | $(VENV)/.deps
	$(PY) -m ipykernel install --sys-prefix --name ccbench --display-name "Python (ccbench)" >/dev/null

demo: setup
	$(VENV)/bin/ccbench run all_reduce,all_gather -r 4 -b 8 -e 64M -f 2 \
	  --algorithms ring,mpi --check --out results/demo.nc
	$(VENV)/bin/ccbench report results/demo.nc -o reports/demo.html --title "ccbench demo"
	@echo; echo "results: $(CURDIR)/results/demo.nc"; echo "report:  $(CURDIR)/reports/demo.html"

# a 4-node Slurm cluster on this machine (testbed/, needs root): a suite of
# sbatch jobs, the topology comparison and a report; torn down at the end
cluster-demo: setup
	$(PY) testbed/demo.py

test: setup
	$(VENV)/bin/pytest -q -ra tests

bench: setup
	$(PY) bench/overhead.py

clean:
	rm -rf build ext/_engine.c ccbench_kit/*.so *.egg-info
