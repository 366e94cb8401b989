#!/usr/bin/env bash
# Issue 35: versions of the kit's own GPU kernels side by side, one device
# call, rounds alternating (nccl-tests, then the committed kernels "A", then
# each variant), with nccl-tests built on the device against the same libnccl.
#   bench/gpu_kernel_ab.sh NCCL_TESTS_SRC VARIANTS_DIR [OUTDIR]   (default $OUT)
# VARIANTS_DIR holds a folder per variant, NAME/, whose files replace those
# of ccbench_kit/backends/gpu_kernels/ while that variant runs.
# Environment: ALG=lsa-vec (the algorithm timed and checked), KIT_ARGS="-R 2"
# (the kit's other flags), NT_ARGS="-R 2 -D 2" (all_reduce_perf's: the
# reference), N=2 (GPUs), ROUNDS=3, SIZES="-b 1M -e 1G -f 4 -w 5 -n 20" (both
# sides), CHECK_TO=256M.  Every version is first run with --check in fp32,
# bf16 and fp16 from 6 B to CHECK_TO (x64: odd counts, the tail).
# Outputs: OUTDIR/summary.txt, OUTDIR/runs.tgz; table: gpu_kernel_ab_table.py.
set -u -o pipefail
NAME=kernel-ab
SRC=$(cd "${1:?give the nccl-tests source folder}" && pwd)
VARIANTS=$(cd "${2:?give the variants folder}" && pwd)
shift 2
. "$(dirname "$0")/gpu_setup.sh"
ALG=${ALG:-lsa-vec}
KIT_ARGS=${KIT_ARGS--R 2}
NT_ARGS=${NT_ARGS--R 2 -D 2}
N=${N:-2}
ROUNDS=${ROUNDS:-3}
SIZES=${SIZES:-"-b 1M -e 1G -f 4 -w 5 -n 20"}
CHECK_TO=${CHECK_TO:-256M}
SUM=$OUTDIR/summary.txt
RUNS=$WORK/runs
KERNELS=$ROOT/ccbench_kit/backends/gpu_kernels
mkdir -p "$RUNS" "$WORK/variants/A"
export CCB_KERNEL_CACHE=$WORK/kernel-cache
cp -a "$VARIANTS"/*/ "$WORK/variants/"
for f in $(cd "$WORK/variants" && find . -mindepth 2 -type f -printf '%f\n' | sort -u); do
    [ -f "$KERNELS/$f" ] && cp "$KERNELS/$f" "$WORK/variants/A/"
done
NAMES=$(cd "$WORK/variants" && ls -d */ | tr -d / | sort)
{ echo "# $(date -u +%FT%TZ) $(hostname)"; nvidia-smi -L; echo "loadavg: $(cat /proc/loadavg)"
  echo "ALG=$ALG KIT_ARGS=$KIT_ARGS NT_ARGS=$NT_ARGS versions: $NAMES"; } >>"$SUM"
nccl_home
nccl_tests_build "$SRC" "$RUNS/nccltests_build.log"  # NT_PID
build_kit
visible() { seq -s, 0 $(($1 - 1)); }
use() { cp "$WORK/variants/$1/"* "$KERNELS/"; }
ccb() {
    local name=$1; shift
    CUDA_VISIBLE_DEVICES=$(visible "$N") timeout 200 $PY -m ccbench_kit run all_reduce "$@" \
        --backend nccl -r "$N" --non-interactive --out "$RUNS/$name.nc" >"$RUNS/$name.txt" 2>&1
    echo "ccbench $name ($*): rc=$?" | tee -a "$SUM"
}
for v in $NAMES; do
    use "$v"
    for dt in fp32 bf16 fp16; do
        ccb "check_${v}_$dt" --algorithms "$ALG" $KIT_ARGS -b 6 -e "$CHECK_TO" -f 64 -d $dt \
            --check -w 1 -n 2
    done
done
wait $NT_PID
echo "nccl-tests build rc=$?" | tee -a "$SUM"
echo "load before timing: $(cat /proc/loadavg)" >>"$SUM"
for round in $(seq 1 "$ROUNDS"); do
    CUDA_VISIBLE_DEVICES=$(visible "$N") timeout 180 mpirun --allow-run-as-root -np "$N" \
        --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x CUDA_VISIBLE_DEVICES \
        "$WORK/nt/all_reduce_perf" -g 1 -c 0 $SIZES $NT_ARGS >"$RUNS/nt_r$round.txt" 2>&1
    echo "nt_r$round ($NT_ARGS) rc=$?" | tee -a "$SUM"
    for v in $NAMES; do
        use "$v"
        ccb "kit_${v}_r$round" --algorithms "$ALG" $KIT_ARGS --timing batch -a 1 $SIZES
    done
done
use A
echo "load after: $(cat /proc/loadavg)" >>"$SUM"
tar -C "$WORK" -czf "$OUTDIR/runs.tgz" runs
rm -rf "$WORK"
