#!/usr/bin/env bash
# Issue 35 on a GPU machine, one device call: the kit's own GPU kernels
# (backends/gpu_kernels) and NCCL's symmetric windows (-R 2).
#   bench/gpu_kernels.sh [OUTDIR]        (default $OUT)
# Builds the kit, runs tests/test_gpu_kernels.py (every own kernel checked
# against numpy, fp32/bf16/fp16, odd counts, in and out of place, a CUDA
# graph; 3 ranks sharing the GPU where fewer than 3 are lent), then with
# `ccbench run --check`: the own kernels at 1 GiB, and -R 2 beside -R 0 on
# every GPU with the symmetric kernel NCCL ran (--show-algorithm, nccl_ran).
# On a machine of fewer GPUs than ranks the own kernels' times are of ranks
# time-slicing one GPU: a correctness check, not a measurement.
# Outputs: OUTDIR/log.txt, OUTDIR/pytest.txt, OUTDIR/runs.txt.
set -u -o pipefail
NAME=gpu-kernels
. "$(dirname "$0")/gpu_setup.sh"
NG=$(nvidia-smi -L | wc -l)
OWN_RANKS=$(( NG >= 3 ? (NG > 4 ? 4 : NG) : 3 ))
DEADLINE=${DEADLINE:-400}   # seconds for the whole script: runs that would pass it are skipped
RUNS=$OUTDIR/runs.txt
{ date -u +%FT%TZ; nvidia-smi -L; cat /proc/loadavg; nvidia-smi --query-gpu=driver_version --format=csv,noheader
  $PY -c "import glob,site; print(glob.glob(site.getsitepackages()[0]+'/nvidia/*/lib/libnvrtc.so*'))"
} >>"$LOG" 2>&1
export CCB_KERNEL_CACHE=$WORK/kernel-cache
build_kit
say "GPU tests ($OWN_RANKS ranks on $NG GPU(s))"
timeout 200 $PY -m pytest -q -rs -p no:cacheprovider tests/test_gpu_kernels.py >"$OUTDIR/pytest.txt" 2>&1
say "GPU tests rc=$?"
ls -la "$CCB_KERNEL_CACHE" >>"$LOG" 2>&1
ccb() {  # NAME RANKS ARGS...: one `ccbench run --backend nccl`, its output appended to runs.txt
    local name=$1 ranks=$2; shift 2
    local left=$((DEADLINE - SECONDS - 10))
    [ $left -lt 20 ] && { say "$name: skipped, no time left"; return; }
    [ $left -gt 120 ] && left=120
    say "$name: ccbench run $* -r $ranks (up to $left s)"
    echo "=== $name: ccbench run $* -r $ranks" >>"$RUNS"
    timeout $left $PY -m ccbench_kit run "$@" --backend nccl -r "$ranks" --non-interactive \
        --out "$WORK/$name.nc" >>"$RUNS" 2>&1
    local rc=$?
    say "$name rc=$rc"
    [ -f "$WORK/$name.nc" ] && $PY -c "
import sys, ccbench_kit as ccb
ds = ccb.load(sys.argv[1])  # a file of several collectives loads as a tree: its attrs only
for k in ('nccl_ran', 'not_available', 'ranks_per_gpu', 'local_register', 'mem_type', 'kernel_target'):
    print(k, '=', ds.attrs.get(k))
if 'wrong' in getattr(ds, 'data_vars', {}):
    print('wrong max', int(ds['wrong'].max()))" "$WORK/$name.nc" >>"$RUNS" 2>&1
}
ccb r2 "$NG" all_reduce,all_gather,reduce_scatter -R 2 -b 8 -e 64M -f 8 --check --show-algorithm -n 20 -w 5
if [ "$NG" -ge 2 ]; then  # side by side with NCCL, one GPU a rank
    ccb side_ar "$NG" all_reduce --algorithms nccl,oneshot,twoshot -b 8 -e 1G -f 4 --check -n 20 -w 5
    ccb side_ag_rs "$NG" all_gather,reduce_scatter --algorithms nccl,direct -b 1K -e 256M -f 16 --check -n 20 -w 5
    ccb side_batch "$NG" all_reduce --algorithms nccl,oneshot,twoshot -b 8 -e 32K -f 8 --timing batch -n 200 -w 20
    ccb side_graph "$NG" all_reduce --algorithms nccl,oneshot,twoshot -b 8 -e 32K -f 8 -G 10 -n 20 -w 5
fi
ccb own_1g_ar $OWN_RANKS all_reduce --algorithms oneshot,twoshot -b 1G -e 1G -n 1 -w 0 --check -d fp32
rm -rf "$WORK"
