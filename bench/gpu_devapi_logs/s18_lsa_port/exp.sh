#!/usr/bin/env bash
# session 18 experiment: lsa-vec vs a line-for-line port of nccl-tests' -D 2 (lsa-nt, lsa-nt2) vs nt -D 2
# lsa-nt2 is the port of nccl-tests' kernel, not committed (bench/RESULTS.md says how it was made);
# lsa-vec2 is beside this script; copy the kernels' .cu/.py pairs into backends/gpu_kernels/ to rerun.
set -u -o pipefail
NAME=exp
SRC=$(cd third_party_build/nccl-tests && pwd)
. bench/gpu_setup.sh "$1"
SUM=$OUTDIR/summary.txt
RUNS=$WORK/runs; mkdir -p $RUNS
export CCB_KERNEL_CACHE=$WORK/kernel-cache
{ echo "# $(date -u +%FT%TZ)"; nvidia-smi -L; echo "loadavg: $(cat /proc/loadavg)"; } >>"$SUM"
nccl_home
mkdir -p "$WORK/mpihome"
ln -s "$(mpicc --showme:incdirs | awk '{print $1}')" "$WORK/mpihome/include"
ln -s "$(mpicc --showme:libdirs | awk '{print $1}')" "$WORK/mpihome/lib"
cp -a "$SRC" "$WORK/nccl-tests"
( cd "$WORK/nccl-tests/src" && timeout 400 make -j"$(nproc)" MPI=1 MPI_HOME="$WORK/mpihome" \
    NCCL_HOME="$WORK/ncclhome" NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" \
    BUILDDIR="$WORK/nt" "$WORK/nt/all_reduce_perf" ) >"$RUNS/nccltests_build.log" 2>&1 &
NT_PID=$!
build_kit
SIZES="-b 1M -e 1G -f 2 -w 5 -n 20"
say "check"
CUDA_VISIBLE_DEVICES=0,1 timeout 200 $PY -m ccbench_kit run all_reduce --backend nccl -r 2 --non-interactive \
   --algorithms lsa-vec,lsa-vec2,lsa-nt2 -R 2 --sizes 4,12,1K,4100,1M,1048580,64M --check -w 1 -n 2 --placement both \
   --out $RUNS/check.nc > $RUNS/check.txt 2>&1; echo "check rc=$?" | tee -a $SUM
tail -30 $RUNS/check.txt >> $SUM
wait $NT_PID; echo "nt build rc=$?" >> $SUM
for r in 1 2 3; do  # lsa-vec2 round
  say "round $r"
  CUDA_VISIBLE_DEVICES=0,1 timeout 120 mpirun --allow-run-as-root -np 2 --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH \
     -x CUDA_VISIBLE_DEVICES "$WORK/nt/all_reduce_perf" -g 1 -c 0 $SIZES -R 2 -D 2 > $RUNS/nt_R2_D2_n2_r$r.txt 2>&1
  CUDA_VISIBLE_DEVICES=0,1 timeout 200 $PY -m ccbench_kit run all_reduce --backend nccl -r 2 --non-interactive \
     --algorithms lsa-vec,lsa-vec2,lsa-nt2 -R 2 --timing batch -a 1 $SIZES --out $RUNS/kit_exp_n2_r$r.nc > $RUNS/kit_exp_n2_r$r.txt 2>&1
  echo "round $r rc=$?" >> $SUM
done
echo "loadavg after: $(cat /proc/loadavg)" >> $SUM
tar -C "$WORK" -czf "$OUTDIR/runs.tgz" runs
