#!/usr/bin/env bash
# The nccl backend on a GPU machine, in one call: build the kit, run the GPU
# tests, compare with nccl-tests side by side, sweep NCCL's algorithms and
# the timing modes, and (4+ GPUs) a split-group case.  Works on any number
# of GPUs (one rank per GPU).
#
#   bench/gpu_issue4.sh NCCL_TESTS_BIN_DIR [OUTDIR]
#
# NCCL_TESTS_BIN_DIR holds nccl-tests' *_perf binaries (built with MPI=1;
# how they are built is up to the caller).  Environment:
#   WAIT_PID   a process (the nccl-tests build) to wait for before comparing
#   MAXBYTES   largest size (default 4G)       SWEEP   all_reduce algorithms to sweep
#   ITERS WARMUP (20, 5)   SKIP_TESTS=1 (no pytest)   DEADLINE (560 s for the whole script)
#   LAT_REPEATS (2) BAND_REPEATS (0): extra rounds of the small sizes / of 256 MiB-MAXBYTES
# Results: OUTDIR/summary.md, OUTDIR/log.txt and OUTDIR/results.tgz (Datasets, logs).
set -u -o pipefail
BIN=$(cd "${1:?give the folder of nccl-tests binaries}" 2>/dev/null && pwd || echo "$1")
OUTDIR=${2:-${OUT:-/tmp/ccbench-gpu}}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/ccbench-gpu.XXXX)
MAXBYTES=${MAXBYTES:-4G}
ITERS=${ITERS:-20}
WARMUP=${WARMUP:-5}
SWEEP=${SWEEP:-nccl,nccl:ring,nccl:tree,nccl:ring/ll}
DEADLINE=${DEADLINE:-560}   # seconds this script may take (the device's limit is 600)
PY=${PYTHON:-python3}
mkdir -p "$OUTDIR"
LOG=$OUTDIR/log.txt
SUM=$OUTDIR/summary.md
: >"$SUM"
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}   # never NVLink multicast on shared hosts
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1
cd "$ROOT"

say() { echo "[$(date +%T)] $*" | tee -a "$LOG"; }
step() {  # step NAME TIMEOUT CMD...: run, log, keep going on failure
    local name=$1 limit=$2; shift 2
    local left=$((DEADLINE - SECONDS - 30))
    [ $left -lt $limit ] && limit=$left
    [ $limit -lt 10 ] && { say "== $name: skipped, no time left"; return 124; }
    say "== $name (up to $limit s)"
    timeout "$limit" "$@" >"$WORK/$name.log" 2>&1
    local rc=$?
    tail -n 40 "$WORK/$name.log" >>"$LOG"
    say "== $name: rc=$rc"
    return $rc
}

if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then   # carried wheels (h5netcdf...)
    $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/ccb-site .whl/*.whl >>"$LOG" 2>&1
    export PYTHONPATH=/tmp/ccb-site:${PYTHONPATH:-}
fi
export PYTHONPATH=$ROOT:${PYTHONPATH:-}
NGPU=${NGPU:-$(nvidia-smi -L | grep -c '^GPU ')}
{
    echo "# nccl backend on $(hostname): $NGPU GPU(s), $(date -u +%FT%TZ)"
    nvidia-smi -L
    nvidia-smi --query-gpu=driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
    nvidia-smi topo -m
    $PY -c 'import sys, mpi4py, numpy, xarray; print(sys.version.split()[0], "mpi4py", mpi4py.__version__, "numpy", numpy.__version__, "xarray", xarray.__version__)'
    $PY -m pip list 2>/dev/null | grep -i -E "nccl|cuda-runtime|cuda-pathfinder|ml-py"
    mpirun --version | head -1
} >>"$SUM" 2>&1
say "$NGPU GPUs; nccl-tests binaries: $BIN"

step build 300 $PY setup.py -q build_ext --inplace -j "$(nproc)" || { cat "$WORK/build.log" | tail -30; }
step smoke 120 $PY -m ccbench_kit run all_reduce -r "$NGPU" --backend nccl --algorithms nccl,nccl:pat \
    -b 8 -e 64M -f 64 --check --out "$WORK/smoke.nc" --non-interactive
{ echo; echo '## smoke: all_reduce --check'; echo '```'; grep -v '^\[' "$WORK/smoke.log" | tail -12; echo '```'; } >>"$SUM"

gpu_tests() {  # gpu_tests NAME PYTEST-K: the GPU tests, within the time left
    local left=$((DEADLINE - SECONDS - 40))
    [ "${SKIP_TESTS:-0}" = 1 ] && return
    [ $left -lt 30 ] && { say "no time left for the GPU tests ($2)"; return; }
    step "$1" $left $PY -m pytest -q -rs -m gpu -p no:cacheprovider -k "$2" tests/test_nccl_gpu.py
    { echo; echo "## GPU tests: $2"; echo '```'; tail -25 "$WORK/$1.log"; echo '```'; } >>"$SUM"
}
# the checks of every collective while nccl-tests builds; the rest at the end
gpu_tests gpu_tests_collectives "every_collective"

step sweep 300 $PY -m ccbench_kit run all_reduce -r "$NGPU" --backend nccl --algorithms "$SWEEP" \
    --timing batch -b 8 -e "$MAXBYTES" -f 2 -w "$WARMUP" -n "$ITERS" --placement out_of_place \
    --out "$WORK/sweep_all_reduce.nc" --non-interactive
{ echo; echo "## all_reduce algorithm sweep ($SWEEP), batch timing"; echo;
  $PY bench/nccl_compare.py winners "$WORK/sweep_all_reduce.nc"; } >>"$SUM" 2>&1

if [ -n "${WAIT_PID:-}" ]; then
    say "waiting for the nccl-tests build ($WAIT_PID)"
    while kill -0 "$WAIT_PID" 2>/dev/null; do sleep 2; done
fi
if [ ! -x "$BIN/all_reduce_perf" ]; then
    say "no $BIN/all_reduce_perf: skipping the comparison"
else
    # what NCCL logs with TUNING on, as a sample of the lines the backend parses
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING timeout 60 mpirun --allow-run-as-root -np "$NGPU" \
        "$BIN/all_reduce_perf" -b 8 -e 64M -f 64 -w 1 -n 1 -c 0 >"$WORK/tuning_sample.log" 2>&1
    nvidia-smi dmon -s pc -o T >"$WORK/dmon_compare.log" 2>&1 &   # clocks and power, 1/s
    DMON=$!
    step compare 900 $PY bench/nccl_compare.py compare --nccl-tests "$BIN" --out "$WORK/compare" \
        -r "$NGPU" -b 8 -e "$MAXBYTES" -f 2 -w "$WARMUP" -n "$ITERS" --latency-repeats "${LAT_REPEATS:-2}" \
        --band-repeats "${BAND_REPEATS:-0}" --band 256M "$MAXBYTES"
    kill $DMON 2>/dev/null
    { echo; cat "$WORK/compare/compare.md"; } >>"$SUM" 2>&1
fi

if [ "$NGPU" -ge 4 ] && [ -x "$BIN/all_reduce_perf" ]; then
    step split_nccltests 120 env NCCL_TESTS_SPLIT="MOD 2" mpirun --allow-run-as-root -np "$NGPU" \
        "$BIN/all_reduce_perf" -b 8 -e "$MAXBYTES" -f 4 -w "$WARMUP" -n "$ITERS" -c 0
    step split_ccbench 200 $PY -m ccbench_kit run all_reduce -r "$NGPU" --backend nccl --algorithms nccl \
        --timing batch --split "MOD 2" -b 8 -e "$MAXBYTES" -f 4 -w "$WARMUP" -n "$ITERS" \
        --out "$WORK/split_all_reduce.nc" --non-interactive
    { echo; echo '## split groups (MOD 2): nccl-tests'; echo '```'; grep -E '^ +[0-9]' "$WORK/split_nccltests.log";
      echo '```'; echo; echo '## split groups (MOD 2): ccbench'; echo '```'; grep -v '^\[' "$WORK/split_ccbench.log" | tail -20; echo '```'; } >>"$SUM"
fi

for t in batch cuda-events graph; do
    g=(); [ $t = graph ] && g=(-G 1)
    step "timing_$t" 200 $PY -m ccbench_kit run all_reduce -r "$NGPU" --backend nccl --algorithms nccl \
        --timing $t "${g[@]}" -b 8 -e 1G -f 4 -w "$WARMUP" -n "$ITERS" --placement out_of_place \
        --out "$WORK/timing_$t.nc" --non-interactive
done
{ echo; echo "## timing modes: all_reduce, per-iteration events and CUDA graph vs batch"; echo;
  $PY bench/nccl_compare.py timing "$WORK/timing_cuda-events.nc" "$WORK/timing_batch.nc" \
      "$WORK/timing_graph.nc"; } >>"$SUM" 2>&1

gpu_tests gpu_tests_rest "not every_collective"

tar -C "$WORK" -czf "$OUTDIR/results.tgz" . && say "results: $OUTDIR/results.tgz ($(du -h "$OUTDIR/results.tgz" | cut -f1))"
rm -rf "$WORK"
