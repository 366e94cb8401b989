#!/usr/bin/env bash
# The doctor on every GPU of one host with the NVLink pair matrix, one device call:
#   bench/gpu_pairs.sh [OUTDIR]        (default $OUT)
# Builds the kit, runs the gpu-marked tests of --per-gpu and the pair matrix
# (every GPU count of the machine), then `ccbench doctor --local --per-gpu`:
# clean (saving a baseline, then against it, timed), and with a competing
# load from testbed/gpu_load.py: a peer copy loop between two GPUs (the pair
# should be named), a matmul loop on one GPU (that GPU).  On one GPU it
# shows the one-line refusals of --per-gpu and --pairs and runs the plain
# --local check.  Writes OUTDIR/env.txt, log.txt, summary.txt (command, exit
# code, seconds, verdict line per run), pytest_gpu.txt, pair_torch.txt (the
# copy-engine matrix beside PyTorch's copy_, bench/gpu_pair_torch.py) and results.tgz.
# RUNS=N repeats the clean / peer-copy / matmul runs N times, interleaved
# (each round draws its GPUs anew), against the one saved baseline, until
# DEADLINE seconds (of this script) would be passed; EXTRA_RUNS=N rounds of
# the other faults follow (a half-time matmul, a PCIe copy loop, two GPUs
# loaded judged with and without the baseline); GPU_TESTS=0 skips the
# gpu-marked tests.
set -u -o pipefail
NAME=gpu-pairs
. "$(dirname "$0")/gpu_setup.sh"
{
    date -u +%FT%TZ; hostname; nvidia-smi -L; nproc; cat /proc/loadavg
    nvidia-smi topo -m; nvidia-smi nvlink -s 2>&1 | head -40
    mpirun --version | head -1
    env | grep -E "^NCCL_|NVLS"
} >"$OUTDIR/env.txt" 2>&1
SUMMARY=$OUTDIR/summary.txt
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU ")
say "GPUs: $NGPU"
build_kit

# one doctor run: its output in WORK, a summary line (label, exit code,
# seconds, the last line: the verdict or the refusal)
doctor() {
    local label=$1; shift
    local t0=$SECONDS
    timeout 300 $PY -m ccbench_kit doctor "$@" >"$WORK/$label.out" 2>"$WORK/$label.err"
    local rc=$?
    local last
    last=$(tail -n 1 "$WORK/$label.out")
    [ -s "$WORK/$label.err" ] && [ "$rc" = 2 ] && last=$(tail -n 1 "$WORK/$label.err")
    printf '%-22s rc=%s %4ss  %s\n' "$label" "$rc" "$((SECONDS - t0))" "$last" | tee -a "$SUMMARY" "$LOG"
    cat "$WORK/$label.out" "$WORK/$label.err" >>"$LOG"
}

# a competing load (testbed/gpu_load.py KIND on GPU, [--peer P]) started in
# the background; waits for its "ready"; its PID appended to LOADS
LOADS=""
load() {
    local out="$WORK/load-$1-$2.out"
    $PY -m testbed.gpu_load --gpu "$1" --kind "$2" ${3:+--peer "$3"} >"$out" 2>&1 &
    LOADS="$LOADS $!"
    for _ in $(seq 60); do grep -q ready "$out" && break; sleep 1; done
}
unload() { for p in $LOADS; do kill "$p"; wait "$p" 2>/dev/null; done; LOADS=""; }

if [ "${GPU_TESTS:-1}" != 0 ]; then
say "gpu-marked tests"
timeout 400 $PY -m pytest -q -rs -m gpu -p no:cacheprovider tests/test_doctor_per_gpu_gpus.py \
    tests/test_doctor_gpu_pairs_gpus.py >"$OUTDIR/pytest_gpu.txt" 2>&1
say "gpu-marked tests rc=$?"; tail -15 "$OUTDIR/pytest_gpu.txt" | tee -a "$LOG"
fi

cd "$WORK" || exit 1
if [ "$NGPU" -lt 2 ]; then
    # what a 1-GPU host answers: one line each, exit 2, nothing written
    doctor per-gpu-1gpu --per-gpu
    doctor local-per-gpu-1gpu --local --per-gpu
    doctor local-pairs-1gpu --local --pairs
    doctor local-1gpu --local --repeats 3 --out "$WORK/local.nc"
else
    doctor clean-save --local --per-gpu --save-baseline "$WORK/base.json" --out "$WORK/clean.nc"
    # a round (clean, peer copy, matmul) took about 60 s on 2 H200, 75 s on 4
    for run in $(seq "${RUNS:-1}"); do
    [ -n "${DEADLINE:-}" ] && [ "$run" -gt 1 ] && [ $((SECONDS + 85)) -gt "$DEADLINE" ] && \
        { say "round $run: not started (DEADLINE)"; break; }
    doctor "clean-r$run" --local --per-gpu --baseline "$WORK/base.json" --out "$WORK/clean$run.nc"
    A=$((RANDOM % NGPU)); B=$(( (A + 1 + RANDOM % (NGPU - 1)) % NGPU ))
    say "peer copy loop gpu$A <-> gpu$B"; load "$A" peer-copy "$B"
    doctor "peer-copy-gpu$A-gpu$B-r$run" --local --per-gpu --baseline "$WORK/base.json" \
        --out "$WORK/peer$run.nc"; unload
    C=$((RANDOM % NGPU))
    say "matmul loop on gpu$C"; load "$C" compute
    doctor "compute-gpu$C-r$run" --local --per-gpu --baseline "$WORK/base.json" \
        --out "$WORK/compute$run.nc"; unload
    done
    # EXTRA_RUNS=N: the other faults, each round drawing its GPUs anew: the
    # matmul loop half the time on one GPU, host <-> GPU copies on one GPU
    # (its PCIe), the matmul loop on two GPUs at once judged with and
    # without the baseline
    for run in $(seq "${EXTRA_RUNS:-0}"); do
    [ -n "${DEADLINE:-}" ] && [ $((SECONDS + 120)) -gt "$DEADLINE" ] && \
        { say "extra round $run: not started (DEADLINE)"; break; }
    X=$((RANDOM % NGPU)); say "half-time matmul on gpu$X"; load "$X" partial
    doctor "partial-gpu$X-r$run" --local --per-gpu --baseline "$WORK/base.json"; unload
    Y=$((RANDOM % NGPU)); say "PCIe copy loop on gpu$Y"; load "$Y" pcie-copy
    doctor "pcie-gpu$Y-r$run" --local --per-gpu --baseline "$WORK/base.json"; unload
    A=$((RANDOM % NGPU)); B=$(( (A + 1 + RANDOM % (NGPU - 1)) % NGPU ))
    say "matmul on gpu$A and gpu$B"; load "$A" compute; load "$B" compute
    doctor "two-gpu$A-gpu$B-r$run" --local --per-gpu --baseline "$WORK/base.json"
    doctor "two-gpu$A-gpu$B-nobase-r$run" --local --per-gpu; unload
    done
    doctor no-pairs --local --no-pairs --repeats 3 --out "$WORK/nopairs.nc"
    # nothing else running: the copy-engine matrix beside PyTorch's copy_
    say "pair matrix beside torch copy_"
    timeout 120 $PY "$ROOT/bench/gpu_pair_torch.py" "$WORK/clean1.nc" >"$OUTDIR/pair_torch.txt" 2>&1
    say "pair_torch rc=$?"; tail -3 "$OUTDIR/pair_torch.txt" | tee -a "$LOG"
fi
cd "$ROOT" || exit 1
cat /proc/loadavg >>"$LOG"
tar -C "$WORK" -czf "$OUTDIR/results.tgz" --exclude='*.so' . && say "results: $OUTDIR/results.tgz"
rm -rf "$WORK"
