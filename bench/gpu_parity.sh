#!/usr/bin/env bash
# The nccl-tests flags of issue 27 on real GPUs, one device call:
#   bench/gpu_parity.sh [OUTDIR]        (default $OUT)
# Builds the kit, runs the GPU tests of the nccl backend (tests/test_nccl_gpu.py,
# which covers -z 1/2/3 and -C), then `ccbench run --backend nccl` on every GPU
# with -z 3 -C 1 --per_iter_timing 1 -K 2 -M 1 --show-algorithm --check, -d all,
# and --debug; each command's output in OUTDIR/*.txt, exit codes in log.txt.
set -u -o pipefail
NAME=gpu-parity
. "$(dirname "$0")/gpu_setup.sh"
NG=$(nvidia-smi -L | wc -l)
{ date -u +%FT%TZ; nvidia-smi -L; cat /proc/loadavg; } >"$OUTDIR/env.txt" 2>&1
build_kit
ccb() {  # NAME ARGS...: one `ccbench run` on every GPU, its output in NAME.txt
    local name=$1; shift
    say "$name: ccbench run $*"
    timeout 240 $PY -m ccbench_kit run "$@" --backend nccl -r "$NG" --non-interactive \
        --out "$WORK/$name.nc" >"$OUTDIR/$name.txt" 2>&1
    say "$name rc=$?"
}
ccb flags all_reduce,all_gather -b 8 -e 256M -f 8 -z 3 -C 1 --per_iter_timing 1 -K 2 -M 1 \
    --show-algorithm --check
ccb z1 all_reduce -b 1K -e 64M -f 64 -z 1
ccb z2 all_reduce -b 1K -e 64M -f 64 -z 2
ccb dall all_reduce -b 1M -e 1M -d all -o sum --check
ccb debug sendrecv -b 1M -e 1M --debug
say "GPU tests"
timeout 330 $PY -m pytest -q -rs -m gpu -p no:cacheprovider tests/test_nccl_gpu.py \
    >"$OUTDIR/pytest_gpu.txt" 2>&1
say "GPU tests rc=$?"
rm -rf "$WORK"
