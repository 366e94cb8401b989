#!/usr/bin/env bash
# The torch backend against the kit's nccl backend on a GPU machine, one
# device call (any number of GPUs, 1 included: one rank per GPU):
#   bench/gpu_torch.sh [OUTDIR]        (default $OUT)
# Builds the kit, finds the libnccl torch loaded and points the nccl backend
# at it (CCB_NCCL_LIBRARY: both sides then run the same NCCL), sweeps
# all_reduce 8 B..1 GiB with torch eager and torch:graph (one run, per-
# iteration CUDA events), the nccl backend with CUDA events and with a CUDA
# graph (-G 1), compares each torch algorithm with the nccl backend per size
# (busbw ratio with its bootstrap interval; the <= 4 KiB rows are the
# framework's overhead), in both placements (torch reduces in place; out of
# place adds its copy, as torch's own out-of-place form does), runs the
# gpu-marked torch tests, then renders the report (torch run, nccl as
# baseline) where the report extra is installed and time is left.
# Every command's output in OUTDIR/*.txt, exit codes in OUTDIR/log.txt,
# the results files in OUTDIR/*.nc, the tables together in OUTDIR/summary.txt
# (bench/gpu_round3.sh runs this script with DEADLINE set and keeps that file).
set -u -o pipefail
NAME=gpu-torch
. "$(dirname "$0")/gpu_setup.sh"
NG=${NGPU:-$(nvidia-smi -L | grep -c '^GPU ')}
ITERS=${ITERS:-20}
WARMUP=${WARMUP:-5}
MAXBYTES=${MAXBYTES:-1G}
DEADLINE=${DEADLINE:-570}   # seconds for the whole script (a device call's limit is 600)
budget() {  # budget LIMIT: LIMIT, or the seconds left before the deadline if fewer
    local left=$((DEADLINE - SECONDS - 10))
    [ "$left" -lt "$1" ] && echo $((left > 1 ? left : 1)) || echo "$1"
}
{
    date -u +%FT%TZ; nvidia-smi -L; cat /proc/loadavg
    $PY -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "NCCL", torch.cuda.nccl.version())'
    $PY -m pip list 2>/dev/null | grep -i -E "^torch |nccl|cuda-runtime"
} >"$OUTDIR/env.txt" 2>&1
build_kit
# the libnccl torch has mapped once it has used NCCL (a static build maps none:
# then the nccl backend finds its own, and env.txt shows both versions)
TORCH_NCCL=$($PY - <<'EOF' 2>>"$LOG"
import torch
torch.cuda.nccl.version()
torch.cuda.nccl.unique_id()   # loads NCCL where torch links it dynamically
print(next((l.split()[-1] for l in open("/proc/self/maps") if "libnccl.so" in l), ""))
EOF
)
if [ -n "$TORCH_NCCL" ]; then
    export CCB_NCCL_LIBRARY=$TORCH_NCCL
    say "both backends on torch's libnccl: $TORCH_NCCL"
else
    say "torch's NCCL is linked in statically (or was not found): the nccl backend loads its own"
fi
echo "torch's libnccl: ${TORCH_NCCL:-(none mapped)}" >>"$OUTDIR/env.txt"
ccb() {  # NAME LIMIT ARGS...: one `ccbench run` of all_reduce on every GPU, output in NAME.txt
    local name=$1 limit=$2; shift 2
    say "$name: ccbench run all_reduce $*"
    timeout "$(budget "$limit")" $PY -m ccbench_kit run all_reduce -r "$NG" -b 8 -e "$MAXBYTES" -f 2 \
        -w "$WARMUP" -n "$ITERS" --non-interactive --out "$OUTDIR/$name.nc" "$@" \
        >"$OUTDIR/$name.txt" 2>&1
    say "$name rc=$?"
}
# no --check in the sweeps (golden results of 1 GiB on every rank take longer than the
# sweep); tests/test_torch_gpu.py checks every collective, eager and graph
ccb torch 120 --backend torch --algorithms torch,torch:graph
ccb nccl 90 --backend nccl --algorithms nccl
cmp() {  # NAME ARGS...: ccbench compare, output in NAME.txt
    local name=$1; shift
    say "$name: ccbench compare $*"
    timeout "$(budget 60)" $PY -m ccbench_kit compare "$@" >"$OUTDIR/$name.txt" 2>&1
    say "$name rc=$?"
}
# busbw ratio torch / nccl per size (< 1: torch slower), bootstrap CI; then the small sizes
cmp compare_eager "$OUTDIR/nccl.nc" "$OUTDIR/torch.nc" --algorithm torch=nccl
cmp compare_graph "$OUTDIR/nccl.nc" "$OUTDIR/torch.nc" --algorithm torch:graph=nccl
cmp compare_eager_4k "$OUTDIR/nccl.nc" "$OUTDIR/torch.nc" --algorithm torch=nccl -e 4K
say "GPU tests"
timeout "$(budget 180)" $PY -m pytest -q -rs -m gpu -p no:cacheprovider tests/test_torch_gpu.py \
    >"$OUTDIR/pytest_gpu.txt" 2>&1
say "GPU tests rc=$?"
ccb nccl_graph 90 --backend nccl --algorithms nccl -G 1
cmp compare_graph_vs_nccl_graph "$OUTDIR/nccl_graph.nc" "$OUTDIR/torch.nc" --algorithm torch:graph=nccl
say "report"   # last: the least needed where the deadline is short
timeout "$(budget 120)" $PY -m ccbench_kit report "$OUTDIR/torch.nc" --baseline "$OUTDIR/nccl.nc" \
    -o "$OUTDIR/torch_vs_nccl.html" >"$OUTDIR/report.txt" 2>&1
say "report rc=$?"
{   # one page for bench/RESULTS.md: versions, the side-by-side tables, the comparisons
    echo "# torch backend vs nccl backend: all_reduce, $NG GPU(s)"; echo '```'; cat "$OUTDIR/env.txt"
    for f in torch nccl nccl_graph compare_eager compare_graph compare_graph_vs_nccl_graph; do
        echo; echo "## $f"; grep -v '^\[' "$OUTDIR/$f.txt" 2>/dev/null | tail -n 80
    done
    echo; echo "## GPU tests"; tail -n 15 "$OUTDIR/pytest_gpu.txt" 2>/dev/null; echo '```'
} >"$OUTDIR/summary.txt"
say "summary: $OUTDIR/summary.txt"
rm -rf "$WORK"
