#!/bin/bash
# The own kernels' phases timed alone (NAME:launch, NAME:barrier) on the
# device: the GPU tests of the own kernels and the phases, then one run of
# every own all_reduce kernel and its phases beside NCCL on all the GPUs lent
# (one rank a GPU; on one GPU, one rank: the launch and barrier of a lone
# rank), with --check, and its report.  Usage: bench/gpu_phases.sh [OUTDIR]
NAME=phases
source "$(dirname "$0")/gpu_setup.sh"
build_kit
SUM=$OUTDIR/summary.txt
NG=$(nvidia-smi -L | wc -l)
say "gpus=$NG load=$(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$SUM"
timeout 300 $PY -m pytest -q -p no:cacheprovider tests/test_gpu_phases.py \
    tests/test_gpu_kernels.py -k "(gpu or phase) and not report" >"$OUTDIR/pytest.txt" 2>&1
say "pytest rc=$? $(tail -1 "$OUTDIR/pytest.txt")" | tee -a "$SUM"
ALGS=nccl,oneshot,oneshot:launch,oneshot:barrier,twoshot,twoshot:launch,twoshot:barrier
say "load=$(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$SUM"
timeout 240 $PY -m ccbench_kit run all_reduce --backend nccl -r "$NG" --algorithms $ALGS \
    -b 8 -e 256M -f 4 -n 50 -w 10 --check --out "$OUTDIR/phases.nc" >"$OUTDIR/run.txt" 2>&1
say "run rc=$?" | tee -a "$SUM"
grep -v "^#  *(" "$OUTDIR/run.txt" | head -80 >>"$SUM"
timeout 120 $PY -m ccbench_kit report "$OUTDIR/phases.nc" -o "$OUTDIR/phases.html" \
    >>"$LOG" 2>&1
say "report rc=$?" | tee -a "$SUM"
$PY bench/gpu_phases_table.py "$OUTDIR/phases.nc" >>"$SUM" 2>&1
