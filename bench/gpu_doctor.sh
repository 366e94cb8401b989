#!/usr/bin/env bash
# The GPU doctor's device call (issue 23), one command:
#   bench/gpu_doctor.sh [OUTDIR]        (default $OUT)
# Installs carried wheels (.whl/: h5netcdf), builds the kit, runs
# bench/gpu_doctor.py (PyTorch reference, doctor --local idle / loaded /
# with a baseline) and the GPU tests of the doctor.  Writes OUTDIR/env.txt,
# summary.md, summary.json, pytest_gpu.txt, log.txt and results.tgz.
set -u -o pipefail
NAME=gpu-doctor
. "$(dirname "$0")/gpu_setup.sh"
{
    date -u +%FT%TZ; hostname; nvidia-smi -L; nproc; cat /proc/loadavg
    $PY -c 'import sys, numpy, xarray, torch, pynvml; print(sys.version.split()[0], "numpy", numpy.__version__, "xarray", xarray.__version__, "torch", torch.__version__, "nvidia-ml-py", getattr(pynvml, "__version__", "?"))'
    $PY -m pip list 2>/dev/null | grep -i -E "ml-py|h5netcdf|h5py|cublas|cuda-runtime"
} >"$OUTDIR/env.txt" 2>&1
build_kit
say "doctor acceptance"
timeout 330 $PY bench/gpu_doctor.py --out "$OUTDIR" --work "$WORK" >>"$LOG" 2>&1
say "doctor acceptance rc=$?"
say "GPU tests"
timeout 150 $PY -m pytest -q -rs -m gpu -p no:cacheprovider tests/test_doctor_gpu.py >"$OUTDIR/pytest_gpu.txt" 2>&1
say "GPU tests rc=$?"
tar -C "$WORK" -czf "$OUTDIR/results.tgz" . && say "results: $OUTDIR/results.tgz"
rm -rf "$WORK"
