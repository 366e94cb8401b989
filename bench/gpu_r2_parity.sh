#!/usr/bin/env bash
# Issue 35 item 2, one device call: why the kit's NCCL `-R 2` (symmetric
# windows) read up to 8 % above nccl-tests' `-R 2` at 2-16 MiB on 2 GPUs in
# session 20's table, with the same libnccl.  Per round, alternating:
# nccl-tests `-R 2` with its buffers of -e 1G and of -e 64M (the windows it
# registers are maxBytes long), the kit's NCCL `-R 2` alone (--algorithms
# nccl) with -e 1G and -e 64M, and the kit beside its own kernels as
# session 20 ran it.  First, untimed: which symmetric kernel NCCL ran for
# each size in nccl-tests (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING), beside
# the kit's `nccl_ran`.
# MODE=unique instead: nccl-tests `-R 2` and `-R 2 -D 2` beside the kit's
# nccl and lsa-vec with `-R 2`, without and with --unique-buff (nccl-tests
# moves its buffers' offset every iteration, "to avoid cache effects").
#   bench/gpu_r2_parity.sh NCCL_TESTS_SRC [OUTDIR]   (default $OUT)
# Environment: N=2 (GPUs), ROUNDS=3, FROM=1M, MODE=windows|unique.
# Outputs: OUTDIR/summary.txt, OUTDIR/runs.tgz; table: gpu_r2_parity_table.py.
set -u -o pipefail
NAME=r2-parity
SRC=$(cd "${1:?give the nccl-tests source folder}" && pwd)
shift
. "$(dirname "$0")/gpu_setup.sh"
N=${N:-2}
ROUNDS=${ROUNDS:-3}
FROM=${FROM:-1M}
SUM=$OUTDIR/summary.txt
RUNS=$WORK/runs
mkdir -p "$RUNS"
{ echo "# $(date -u +%FT%TZ) $(hostname)"; nvidia-smi -L; echo "loadavg: $(cat /proc/loadavg)"; } >>"$SUM"
nccl_home
nccl_tests_build "$SRC" "$RUNS/nccltests_build.log"  # NT_PID
build_kit
visible() { seq -s, 0 $(($1 - 1)); }
ccb() {  # NAME ARGS...
    local name=$1; shift
    CUDA_VISIBLE_DEVICES=$(visible "$N") timeout 200 $PY -m ccbench_kit run all_reduce "$@" \
        --backend nccl -r "$N" --non-interactive --out "$RUNS/$name.nc" >"$RUNS/$name.txt" 2>&1
    echo "ccbench $name ($*): rc=$?" | tee -a "$SUM"
}
nt() {  # NAME ARGS...
    local name=$1; shift
    CUDA_VISIBLE_DEVICES=$(visible "$N") timeout 180 mpirun --allow-run-as-root -np "$N" \
        --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x CUDA_VISIBLE_DEVICES \
        -x NCCL_DEBUG -x NCCL_DEBUG_SUBSYS \
        "$WORK/nt/all_reduce_perf" -g 1 -c 0 "$@" >"$RUNS/$name.txt" 2>&1
    echo "nccl-tests $name ($*): rc=$?" | tee -a "$SUM"
}
wait $NT_PID
echo "nccl-tests build rc=$?" | tee -a "$SUM"
T="-f 2 -w 5 -n 20"
if [ "${MODE:-windows}" = unique ]; then
    echo "load before timing: $(cat /proc/loadavg)" >>"$SUM"
    for r in $(seq 1 "$ROUNDS"); do
        nt "nt_R2_r$r" -R 2 -b "$FROM" -e 64M $T
        nt "nt_D2_r$r" -R 2 -D 2 -b "$FROM" -e 64M $T
        ccb "kit_warm_r$r" --algorithms nccl,lsa-vec -R 2 --timing batch -a 1 -b "$FROM" -e 64M $T
        ccb "kit_unique_r$r" --algorithms nccl,lsa-vec -R 2 --unique-buff --timing batch -a 1 \
            -b "$FROM" -e 64M $T
    done
    ROUNDS=0
else
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING nt nt_tuning -R 2 -b 8 -e 64M -f 2 -w 1 -n 1
    echo "load before timing: $(cat /proc/loadavg)" >>"$SUM"
fi
for r in $(seq 1 "$ROUNDS"); do
    nt "nt_1G_r$r" -R 2 -b "$FROM" -e 1G $T
    nt "nt_64M_r$r" -R 2 -b "$FROM" -e 64M $T
    ccb "kit_1G_r$r" --algorithms nccl -R 2 --timing batch -a 1 -b "$FROM" -e 1G $T
    ccb "kit_64M_r$r" --algorithms nccl -R 2 --timing batch -a 1 -b "$FROM" -e 64M $T
    ccb "kit_six_r$r" --algorithms nccl,lsa,lsa-vec,oneshot,oneshot-ll,twoshot -R 2 \
        --timing batch -a 1 -b "$FROM" -e 64M $T
done
echo "load after: $(cat /proc/loadavg)" >>"$SUM"
tar -C "$WORK" -czf "$OUTDIR/runs.tgz" runs
rm -rf "$WORK"
