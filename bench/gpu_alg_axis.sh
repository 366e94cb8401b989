#!/usr/bin/env bash
# Issue 35 (and 34's nccl-tests parity) on a GPU machine, one device call:
# the kit's own all_reduce kernels beside NCCL and beside nccl-tests 2.19.6
# built here against the same libnccl the kit loads.
#   bench/gpu_alg_axis.sh NCCL_TESTS_SRC [OUTDIR]      (default $OUT)
# NCCL_TESTS_SRC: an nccl-tests source tree (a fetched snapshot), built here
# (MPI=1 where mpicc is found, else MPI=0 with -g NGPU; sm_90 only) while the
# kit builds, then: tests/test_gpu_kernels.py (every own kernel against
# numpy), the own kernels with --check (fp16 8 B-1 GiB, bf16 24 B-192 MiB), and
# the timed runs, one after another, nothing else running:
#   nccl-tests all_reduce_perf: default, -R 2, -R 2 -D 1, -R 2 -D 2;
#   ccbench all_reduce --algorithms nccl alone, then nccl,oneshot,twoshot (batch timing, as
#   nccl-tests times; -a 1: the mean over ranks, nccl-tests' default), -R 2
#   (nccl), and the small sizes with CUDA events and in a CUDA graph.
# Every run: -b 8 -e 1G -f 2 -w 5 -n 20.  Outputs: OUTDIR/summary.txt (the
# tables), OUTDIR/log.txt, OUTDIR/runs.tgz (Datasets, logs).
set -u -o pipefail
NAME=gpu-alg-axis
SRC=$(cd "${1:?give the nccl-tests source folder}" && pwd)
shift
. "$(dirname "$0")/gpu_setup.sh"
NG=$(nvidia-smi -L | grep -c "^GPU ")
SUM=$OUTDIR/summary.txt
RUNS=$WORK/runs
mkdir -p "$RUNS"
export CCB_KERNEL_CACHE=$WORK/kernel-cache
SIZES="-b 8 -e 1G -f 2 -w 5 -n 20"
{ echo "# $(date -u +%FT%TZ) $(hostname)"; nvidia-smi -L
  nvidia-smi --query-gpu=driver_version,clocks.sm,clocks.mem,temperature.gpu,utilization.gpu --format=csv
  echo "loadavg: $(cat /proc/loadavg)"; } >>"$SUM" 2>&1

nccl_home  # NCCL_LIB, NCCL_DIR, $WORK/ncclhome: the libnccl the kit loads, for nccl-tests
nccl_tests_build "$SRC" "$RUNS/nccltests_build.log"  # NT_PID
build_kit
say "GPU tests"
timeout 200 $PY -m pytest -q -rs -p no:cacheprovider tests/test_gpu_kernels.py >"$RUNS/pytest.txt" 2>&1
TESTS_RC=$?
echo "tests/test_gpu_kernels.py rc=$TESTS_RC : $(tail -1 "$RUNS/pytest.txt")" | tee -a "$SUM"
OWN=",oneshot,twoshot"  # the own kernels are timed only where they passed their tests
[ $TESTS_RC = 0 ] || OWN=""
wait $NT_PID
echo "nccl-tests build rc=$? $(ls "$WORK/nt/all_reduce_perf" 2>&1)" | tee -a "$SUM"

ccb() {  # NAME ARGS...: one `ccbench run all_reduce --backend nccl -r NG`, table in NAME.txt
    local name=$1; shift
    say "ccbench $name: $*"
    timeout 150 $PY -m ccbench_kit run all_reduce "$@" --backend nccl -r "$NG" --non-interactive \
        --out "$RUNS/$name.nc" >"$RUNS/$name.txt" 2>&1
    echo "ccbench $name ($*): rc=$?" | tee -a "$SUM"
}
nt() {  # NAME ARGS...: one all_reduce_perf, one process a GPU
    local name=$1; shift
    say "nccl-tests $name: $*"
    if [ "$NT_MPI" = 1 ]; then
        timeout 180 mpirun --allow-run-as-root -np "$NG" --bind-to none -x NCCL_NVLS_ENABLE \
            -x LD_LIBRARY_PATH "$WORK/nt/all_reduce_perf" -g 1 -c 0 $SIZES "$@" >"$RUNS/$name.txt" 2>&1
    else
        timeout 180 "$WORK/nt/all_reduce_perf" -g "$NG" -c 0 $SIZES "$@" >"$RUNS/$name.txt" 2>&1
    fi
    echo "nccl-tests $name ($*): rc=$?" | tee -a "$SUM"
}
if [ -n "$OWN" ]; then
    ccb check_fp16 --algorithms oneshot,twoshot -b 8 -e 1G -f 8 -d fp16 --check -w 1 -n 2
    ccb check_bf16 --algorithms oneshot,twoshot -b 24 -e 192M -f 8 -d bf16 --check -w 1 -n 2
fi
echo "load before timing: $(cat /proc/loadavg)" >>"$SUM"
if [ -x "$WORK/nt/all_reduce_perf" ]; then
    nt nt_default
    nt nt_R2 -R 2
    nt nt_R2_D1 -R 2 -D 1
    nt nt_R2_D2 -R 2 -D 2
fi
ccb kit_nccl --algorithms nccl --timing batch -a 1 $SIZES  # nccl-tests' default, alone
ccb kit_batch --algorithms nccl$OWN --timing batch -a 1 $SIZES
ccb kit_R2 --algorithms nccl -R 2 --timing batch -a 1 $SIZES --show-algorithm
ccb kit_events --algorithms nccl$OWN -a 1 -b 8 -e 8M -f 8 -w 5 -n 20
ccb kit_graph --algorithms nccl$OWN -G 10 -a 1 -b 8 -e 8M -f 8 -w 5 -n 20
echo "load after: $(cat /proc/loadavg)" >>"$SUM"
for f in "$RUNS"/nt_*.txt "$RUNS"/kit_*.txt "$RUNS"/check_*.txt; do
    { echo "=== $(basename "$f")"; grep -v "^\[" "$f" | tail -n 45; } >>"$SUM"
done
tar -C "$WORK" -czf "$OUTDIR/runs.tgz" runs && say "archive: $OUTDIR/runs.tgz"
rm -rf "$WORK"
