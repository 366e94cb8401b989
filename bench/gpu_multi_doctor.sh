#!/usr/bin/env bash
# The doctor on several GPUs of one host (issue 24), one device call:
#   bench/gpu_multi_doctor.sh [OUTDIR]        (default $OUT)
# Installs carried wheels (.whl/*.whl: h5netcdf), builds the kit, runs
# bench/gpu_multi_doctor.py (clean: doctor --local --per-gpu, ccbench run all_reduce,
# doctor again; then 5 runs with a random GPU loaded: the same doctor).
#  Writes OUTDIR/env.txt, summary.md,
# summary.json, log.txt and results.tgz.
set -u -o pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUTDIR=${1:-${OUT:-/tmp/ccbench-gpu-multi}}
WORK=$(mktemp -d /tmp/ccbench-gpu-multi.XXXX)
PY=${PYTHON:-python3}
mkdir -p "$OUTDIR"
LOG=$OUTDIR/log.txt
# never NVLink multicast on shared hosts
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1
cd "$ROOT"
say() { echo "[$(date +%T)] $*" | tee -a "$LOG"; }
if ls .whl/*.whl >/dev/null 2>&1; then
    $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/ccb-site .whl/*.whl >>"$LOG" 2>&1
    export PYTHONPATH=/tmp/ccb-site
fi
export PYTHONPATH=$ROOT:${PYTHONPATH:-}
{
    date -u +%FT%TZ; hostname; nvidia-smi -L; nproc; cat /proc/loadavg
    nvidia-smi topo -m
    nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv
    mpirun --version | head -1
    $PY -c 'import sys, numpy, xarray, mpi4py, pynvml; print(sys.version.split()[0], "numpy", numpy.__version__, "xarray", xarray.__version__, "mpi4py", mpi4py.__version__, "nvidia-ml-py", getattr(pynvml, "__version__", "?"))'
    $PY -m pip list 2>/dev/null | grep -i -E "ml-py|h5netcdf|nccl|cuda-runtime|cublas"
    env | grep -E "^NCCL_|NVLS" 
} >"$OUTDIR/env.txt" 2>&1
say "build"
timeout 240 $PY setup.py -q build_ext --inplace -j "$(nproc)" >"$WORK/build.log" 2>&1
say "build rc=$?"; tail -5 "$WORK/build.log" >>"$LOG"
say "multi-GPU doctor"
timeout "$((${DEADLINE:-560} - SECONDS))" $PY bench/gpu_multi_doctor.py --out "$OUTDIR" --work "$WORK" 2>&1 | tee -a "$LOG"
say "multi-GPU doctor rc=$?"
cat /proc/loadavg >>"$LOG"
cp -r results "$WORK/nccl_results" 2>/dev/null
tar -C "$WORK" -czf "$OUTDIR/results.tgz" --exclude='*.so' . && say "results: $OUTDIR/results.tgz"
rm -rf "$WORK"
