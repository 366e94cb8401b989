#!/usr/bin/env bash
# Issue 35: the kit's `lsa-vec` (nccl-tests' -D 2) against nccl-tests' own
# -R 2 -D 2, with variants of lsa_vec.cu beside the committed one, one device
# call, rounds alternating (nt, A, variants...).
#   bench/gpu_lsa_vec_ab.sh NCCL_TESTS_SRC VARIANTS_DIR [OUTDIR]   (default $OUT)
# VARIANTS_DIR holds NAME.cu files, each a whole lsa_vec.cu; "A" is the
# committed source.  Environment: N=2 (GPUs), ROUNDS=3, SIZES (both sides).
# Every variant is first run with --check in fp32, bf16 and fp16 (6 B to
# 256 MiB, x64: odd counts, the tail).  Outputs: OUTDIR/summary.txt, runs.tgz.
set -u -o pipefail
NAME=lsa-vec-ab
SRC=$(cd "${1:?give the nccl-tests source folder}" && pwd)
VARIANTS=$(cd "${2:?give the variants folder}" && pwd)
shift 2
. "$(dirname "$0")/gpu_setup.sh"
N=${N:-2}
ROUNDS=${ROUNDS:-3}
SIZES=${SIZES:-"-b 1M -e 1G -f 4 -w 5 -n 20"}
SUM=$OUTDIR/summary.txt
RUNS=$WORK/runs
KERNEL=$ROOT/ccbench_kit/backends/gpu_kernels/lsa_vec.cu
mkdir -p "$RUNS" "$WORK/variants"
export CCB_KERNEL_CACHE=$WORK/kernel-cache
cp "$KERNEL" "$WORK/variants/A.cu"
cp "$VARIANTS"/*.cu "$WORK/variants/"
{ echo "# $(date -u +%FT%TZ) $(hostname)"; nvidia-smi -L; echo "loadavg: $(cat /proc/loadavg)"; } >>"$SUM"
nccl_home
nccl_tests_build "$SRC" "$RUNS/nccltests_build.log"  # NT_PID
build_kit
visible() { seq -s, 0 $(($1 - 1)); }
use() { cp "$WORK/variants/$1.cu" "$KERNEL"; }
ccb() {
    local name=$1; shift
    CUDA_VISIBLE_DEVICES=$(visible "$N") timeout 200 $PY -m ccbench_kit run all_reduce "$@" \
        --backend nccl -r "$N" --non-interactive --out "$RUNS/$name.nc" >"$RUNS/$name.txt" 2>&1
    echo "ccbench $name ($*): rc=$?" | tee -a "$SUM"
}
for v in $(cd "$WORK/variants" && ls *.cu | sed 's/\.cu$//'); do
    use "$v"
    for dt in fp32 bf16 fp16; do
        ccb "check_${v}_$dt" --algorithms lsa-vec -R 2 -b 6 -e 256M -f 64 -d $dt --check -w 1 -n 2
    done
done
wait $NT_PID
echo "nccl-tests build rc=$?" | tee -a "$SUM"
echo "load before timing: $(cat /proc/loadavg)" >>"$SUM"
for round in $(seq 1 "$ROUNDS"); do
    CUDA_VISIBLE_DEVICES=$(visible "$N") timeout 180 mpirun --allow-run-as-root -np "$N" \
        --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x CUDA_VISIBLE_DEVICES \
        "$WORK/nt/all_reduce_perf" -g 1 -c 0 $SIZES -R 2 -D 2 >"$RUNS/nt_D2_r$round.txt" 2>&1
    echo "nt_D2_r$round rc=$?" | tee -a "$SUM"
    for v in $(cd "$WORK/variants" && ls *.cu | sed 's/\.cu$//'); do
        use "$v"
        ccb "kit_${v}_r$round" --algorithms lsa-vec -R 2 --timing batch -a 1 $SIZES
    done
done
use A
echo "load after: $(cat /proc/loadavg)" >>"$SUM"
tar -C "$WORK" -czf "$OUTDIR/runs.tgz" runs
rm -rf "$WORK"
