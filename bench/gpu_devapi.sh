#!/usr/bin/env bash
# Issue 35 on a GPU machine, one device call: nccl-tests' -D 1|2 as the
# kit's `lsa` and `lsa-vec` algorithms (NCCL's device API), beside NCCL,
# the kit's own peer-memory kernels and nccl-tests 2.19.6 built here
# against the same libnccl the kit loads.
#   bench/gpu_devapi.sh NCCL_TESTS_SRC [OUTDIR]       (default $OUT)
# Environment: GPUS="4 2" (the rank counts timed, in order: each run uses the
# first N GPUs), CHECKS="tests lsa ll own1g" (first: tests/test_gpu_kernels.py
# and test_gpu_phases.py; lsa and lsa-vec --check for fp32, bf16, fp16 at 6 B-
# 96 MiB, x64; oneshot-ll the same from 6 B to 1 GiB, x8; every own
# kernel --check in fp16, bf16 and fp32 at 1 GiB), ROUNDS=1 (the timed block
# repeated, for intervals across runs; 0: none), SMALL=0 (1: after the rounds,
# 8 B-32 KiB of nccl, lsa, oneshot and oneshot-ll with CUDA events and in a
# CUDA graph).
# Timed, one after another, nothing else running, every run -b 8 -e 1G -f 2
# -w 5 -n 20 (or $SIZES) and batch timing, as nccl-tests times (-a 1: the mean over
# ranks, its default): all_reduce_perf default, -R 2, -R 2 -D 1, -R 2 -D 2;
# ccbench --algorithms nccl; ccbench --algorithms nccl -R 2 --unique-buff
# (nccl-tests' buffers move every iteration: docs/parity.md); ccbench -R 2
# --algorithms nccl,lsa,lsa-vec,
# oneshot,oneshot-ll,twoshot.  Outputs: OUTDIR/summary.txt, OUTDIR/log.txt,
# OUTDIR/runs.tgz (Datasets, logs).
set -u -o pipefail
NAME=gpu-devapi
SRC=$(cd "${1:?give the nccl-tests source folder}" && pwd)
shift
. "$(dirname "$0")/gpu_setup.sh"
NGPU=$(nvidia-smi -L | grep -c "^GPU ")
GPUS=${GPUS:-"$NGPU 2"}
CHECKS=${CHECKS-tests lsa ll own1g}
ROUNDS=${ROUNDS:-1}
SMALL=${SMALL:-0}
SUM=$OUTDIR/summary.txt
RUNS=$WORK/runs
mkdir -p "$RUNS"
export CCB_KERNEL_CACHE=$WORK/kernel-cache
SIZES=${SIZES:-"-b 8 -e 1G -f 2 -w 5 -n 20"}  # the timed runs' (both sides)
{ echo "# $(date -u +%FT%TZ) $(hostname)"; nvidia-smi -L
  nvidia-smi --query-gpu=driver_version,clocks.sm,clocks.mem,temperature.gpu,utilization.gpu --format=csv
  echo "loadavg: $(cat /proc/loadavg)"; echo "nvcc: $(nvcc --version | tail -1)"; } >>"$SUM" 2>&1

nccl_home  # NCCL_LIB, NCCL_DIR, $WORK/ncclhome: the libnccl the kit loads, for nccl-tests
export CCB_NCCL_INCLUDE=$NCCL_DIR/include   # for the CPU-side compile test too
nccl_tests_build "$SRC" "$RUNS/nccltests_build.log"  # NT_PID
build_kit

visible() { seq -s, 0 $(($1 - 1)); }
ccb() {  # N NAME ARGS...: `ccbench run all_reduce --backend nccl -r N` on the first N GPUs
    local n=$1 name=$2; shift 2
    say "ccbench $name: $*"
    CUDA_VISIBLE_DEVICES=$(visible "$n") timeout 200 $PY -m ccbench_kit run all_reduce "$@" \
        --backend nccl -r "$n" --non-interactive --out "$RUNS/$name.nc" >"$RUNS/$name.txt" 2>&1
    echo "ccbench $name ($*): rc=$?" | tee -a "$SUM"
}
nt() {  # N NAME ARGS...: one all_reduce_perf, one process a GPU
    local n=$1 name=$2; shift 2
    say "nccl-tests $name: $*"
    CUDA_VISIBLE_DEVICES=$(visible "$n") timeout 180 mpirun --allow-run-as-root -np "$n" \
        --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x CUDA_VISIBLE_DEVICES \
        "$WORK/nt/all_reduce_perf" -g 1 -c 0 $SIZES "$@" >"$RUNS/$name.txt" 2>&1
    echo "nccl-tests $name ($*): rc=$?" | tee -a "$SUM"
}
N=${GPUS%% *}
case " $CHECKS " in *" tests "*)
    say "GPU tests"
    timeout 300 $PY -m pytest -q -rs -p no:cacheprovider tests/test_gpu_kernels.py \
        tests/test_gpu_phases.py >"$RUNS/pytest.txt" 2>&1
    echo "tests/test_gpu_kernels.py, test_gpu_phases.py rc=$? : $(tail -1 "$RUNS/pytest.txt")" \
        | tee -a "$SUM" ;;
esac
case " $CHECKS " in *" lsa "*)
    for dt in fp32 bf16 fp16; do
        ccb "$N" "check_${dt}_n$N" --algorithms lsa,lsa-vec -R 2 -b 6 -e 1G -f 64 -d $dt --check -w 1 -n 2
    done ;;
esac
case " $CHECKS " in *" ll "*)
    for dt in fp32 bf16 fp16; do
        ccb "$N" "check_ll_${dt}_n$N" --algorithms oneshot-ll -b 6 -e 1G -f 8 -d $dt --check \
            -w 1 -n 2 --placement both
    done ;;
esac
case " $CHECKS " in *" own1g "*)
    for dt in fp16 bf16 fp32; do
        ccb "$N" "check_${dt}_1G_n$N" --algorithms oneshot,oneshot-ll,twoshot,lsa,lsa-vec -R 2 \
            -b 1G -e 1G -d $dt --check -w 1 -n 2
    done ;;
esac
wait $NT_PID
echo "nccl-tests build rc=$? $(ls "$WORK/nt/all_reduce_perf" 2>&1)" | tee -a "$SUM"
echo "load before timing: $(cat /proc/loadavg)" >>"$SUM"
for round in $(seq 1 "$ROUNDS"); do
    for n in $GPUS; do
        s="n${n}_r$round"
        nt "$n" "nt_default_$s"
        nt "$n" "nt_R2_$s" -R 2
        nt "$n" "nt_R2_D1_$s" -R 2 -D 1
        nt "$n" "nt_R2_D2_$s" -R 2 -D 2
        ccb "$n" "kit_nccl_$s" --algorithms nccl --timing batch -a 1 $SIZES
        ccb "$n" "kit_R2u_$s" --algorithms nccl -R 2 --unique-buff --timing batch -a 1 $SIZES
        ccb "$n" "kit_R2_$s" --algorithms nccl,lsa,lsa-vec,oneshot,oneshot-ll,twoshot -R 2 \
            --timing batch -a 1 \
            $SIZES --show-algorithm
    done
done
if [ "$SMALL" = 1 ]; then
    for n in $GPUS; do
        ccb "$n" "small_events_n$n" --algorithms nccl,lsa,oneshot,oneshot-ll -R 2 -a 1 -b 8 -e 32K \
            -f 8 -w 5 -n 20
        ccb "$n" "small_graph_n$n" --algorithms nccl,lsa,oneshot,oneshot-ll -R 2 -G 10 -a 1 -b 8 \
            -e 32K -f 8 -w 5 -n 20
    done
fi
echo "load after: $(cat /proc/loadavg)" >>"$SUM"
for f in "$RUNS"/nt_*_r1.txt "$RUNS"/kit_*_r1.txt "$RUNS"/check_*.txt "$RUNS"/small_*.txt; do
    [ -f "$f" ] || continue
    { echo "=== $(basename "$f")"; grep -v "^\[" "$f" | tail -n 45; } >>"$SUM"
done
tar -C "$WORK" -czf "$OUTDIR/runs.tgz" runs && say "archive: $OUTDIR/runs.tgz"
rm -rf "$WORK"
