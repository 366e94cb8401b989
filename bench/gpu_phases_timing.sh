#!/bin/bash
# The own kernels' phases under each timing mode (CUDA events, batch, CUDA
# graph) on the GPUs lent, one rank a GPU, 8 B to 32 KiB: how much of a small
# call the launch is in each.  Usage: bench/gpu_phases_timing.sh [OUTDIR]
NAME=phases-timing
source "$(dirname "$0")/gpu_setup.sh"
build_kit
SUM=$OUTDIR/summary.txt
NG=$(nvidia-smi -L | wc -l)
ALGS=nccl,oneshot,oneshot:launch,oneshot:barrier,twoshot,twoshot:launch,twoshot:barrier
for timing in cuda-events batch graph; do
    extra=""; [ $timing = graph ] && extra="-G 10"
    say "gpus=$NG timing=$timing load=$(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$SUM"
    timeout 150 $PY -m ccbench_kit run all_reduce --backend nccl -r "$NG" --algorithms $ALGS \
        -b 8 -e 32K -f 8 -n 200 -w 20 --timing $timing $extra \
        --out "$OUTDIR/phases-$timing.nc" >"$OUTDIR/run-$timing.txt" 2>&1
    say "run rc=$?" | tee -a "$SUM"
    $PY bench/gpu_phases_table.py "$OUTDIR/phases-$timing.nc" >>"$SUM" 2>&1
done
