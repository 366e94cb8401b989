#!/usr/bin/env bash
# Round three on a GPU machine, one device call (issues 33-36):
#   bench/gpu_round3.sh [OUTDIR]        (default $OUT)
# 1. one NCCL communicator init per job: `ccbench run` of 2 collectives x 2
#    data types x 2 cycles (8 parts) with NCCL_DEBUG=INFO, counting NCCL's
#    "Init COMPLETE" lines (one per rank expected) and the launches;
# 2. the per-GPU doctor and the NVLink pair matrix (bench/gpu_pairs.sh);
# 3. the kit's own kernels and -R 2 (bench/gpu_kernels.sh);
# 4. the torch backend beside the nccl backend (bench/gpu_torch.sh), if there.
# Every script's files go into one archive, OUTDIR/round3.tgz, and the
# summary lines into OUTDIR/summary.txt (the device returns 8 files at most).
# ROUND3="init gpu_pairs" (say) runs some steps only; each script has its
# own time limit (LIMIT_<script>, seconds).  Carry .whl (h5netcdf).
set -u -o pipefail
NAME=gpu-round3
. "$(dirname "$0")/gpu_setup.sh"
SUMMARY=$OUTDIR/summary.txt
PARTS=$WORK/parts
mkdir -p "$PARTS"
{ date -u +%FT%TZ; nvidia-smi -L; cat /proc/loadavg; } | tee -a "$SUMMARY"
NG=$(nvidia-smi -L | grep -c "^GPU ")
build_kit
export CCB_BUILT=1

STEPS=${ROUND3:-init gpu_pairs gpu_kernels gpu_torch}
want() { case " $STEPS " in *" $1 "*) return 0;; esac; return 1; }
if want init; then
say "one init per job: 8 parts on $NG rank(s)"
NCCL_DEBUG=INFO timeout 240 $PY -m ccbench_kit run all_reduce,all_gather -d fp32,bf16 \
    --cycles 2 --backend nccl -r "$NG" --sizes 1K,1M -n 5 -w 2 --check --debug \
    --non-interactive --out "$WORK/init.nc" >"$PARTS/init.out" 2>"$PARTS/init.err"
rc=$?
inits=$(cat "$PARTS/init.out" "$PARTS/init.err" | grep -c "Init COMPLETE")
launches=$(grep -c "# debug: launch:" "$PARTS/init.err")
tables=$(grep -c "^# ccbench all_" "$PARTS/init.out")
echo "one-init: rc=$rc ranks=$NG launches=$launches 'Init COMPLETE' lines=$inits tables=$tables" \
    | tee -a "$SUMMARY"
fi
for script in gpu_pairs gpu_kernels gpu_torch; do
    want "$script" && [ -f "$ROOT/bench/$script.sh" ] || continue
    limit_var=LIMIT_$script; limit=${!limit_var:-240}
    say "$script (up to $limit s)"
    mkdir -p "$PARTS/$script"
    DEADLINE=$((limit - 20)) timeout "$limit" bash "$ROOT/bench/$script.sh" "$PARTS/$script" \
        >"$PARTS/$script.out" 2>&1
    echo "$script: rc=$?" | tee -a "$SUMMARY"
    for f in summary.txt pytest_gpu.txt pytest.txt; do
        [ -f "$PARTS/$script/$f" ] && { echo "--- $script/$f"; tail -n 25 "$PARTS/$script/$f"; } >>"$SUMMARY"
    done
done
cat /proc/loadavg >>"$SUMMARY"
tar -C "$WORK" -czf "$OUTDIR/round3.tgz" parts && say "archive: $OUTDIR/round3.tgz"
rm -rf "$WORK"
