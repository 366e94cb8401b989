#!/usr/bin/env bash
# The doctor on several GPUs of one host (issue 24), one device call:
#   bench/gpu_multi_doctor.sh [OUTDIR]        (default $OUT)
# Installs carried wheels (.whl/*.whl: h5netcdf), builds the kit, runs
# bench/gpu_multi_doctor.py (clean: doctor --local --per-gpu, ccbench run all_reduce,
# doctor again; then 5 runs with a random GPU loaded: the same doctor).
#  Writes OUTDIR/env.txt, summary.md,
# summary.json, log.txt and results.tgz.
set -u -o pipefail
NAME=gpu-multi
. "$(dirname "$0")/gpu_setup.sh"
{
    date -u +%FT%TZ; hostname; nvidia-smi -L; nproc; cat /proc/loadavg
    nvidia-smi topo -m
    nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv
    mpirun --version | head -1
    $PY -c 'import sys, numpy, xarray, mpi4py, pynvml; print(sys.version.split()[0], "numpy", numpy.__version__, "xarray", xarray.__version__, "mpi4py", mpi4py.__version__, "nvidia-ml-py", getattr(pynvml, "__version__", "?"))'
    $PY -m pip list 2>/dev/null | grep -i -E "ml-py|h5netcdf|nccl|cuda-runtime|cublas"
    env | grep -E "^NCCL_|NVLS" 
} >"$OUTDIR/env.txt" 2>&1
build_kit
say "multi-GPU doctor"
timeout "$((${DEADLINE:-560} - SECONDS))" $PY bench/gpu_multi_doctor.py --out "$OUTDIR" --work "$WORK" 2>&1 | tee -a "$LOG"
say "multi-GPU doctor rc=$?"
cat /proc/loadavg >>"$LOG"
cp -r results "$WORK/nccl_results" 2>/dev/null
tar -C "$WORK" -czf "$OUTDIR/results.tgz" --exclude='*.so' . && say "results: $OUTDIR/results.tgz"
rm -rf "$WORK"
