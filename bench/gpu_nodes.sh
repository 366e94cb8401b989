#!/usr/bin/env bash
# The doctor across emulated nodes of one GPU host, NCCL over its network
# transport between them (testbed/gpunodes.py), then the per-GPU doctor
# (bench/gpu_pairs.sh), one device call:
#   bench/gpu_nodes.sh [OUTDIR]        (default $OUT)
# 1. probe: ip netns, veth, a bridge, tc tbf (and netem) in a namespace of
#    our own; where this image has no iproute2, the ip and tc carried in
#    .gnbin/ (binaries and their libraries from a Debian 12 machine);
# 2. `ccbench doctor --backend nccl` over NODES emulated nodes (one rank
#    each, their GPUs GPUS), clean and with one node's link (drawn at random)
#    at half rate, with the pair matrix and with --bisect, NODE_ROUNDS
#    times, NCCL_DEBUG=INFO to files: per run the count of NCCL's
#    "via NET/Socket" connection lines and of any other transport's;
# 3. bench/gpu_pairs.sh with RUNS rounds (PAIRS=0 skips it).
# OUTDIR/nodes/{env.txt,log.txt,summary.txt,nccl.tgz} and OUTDIR/pairs/...
# Carry .whl (h5netcdf) and .gnbin (the fallback ip/tc).
set -u -o pipefail
NAME=gpu-nodes
. "$(dirname "$0")/gpu_setup.sh"
NODES_OUT=$OUTDIR/nodes
mkdir -p "$NODES_OUT"
LOG=$NODES_OUT/log.txt
SUMMARY=$NODES_OUT/summary.txt
NG=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU ")
NODES=${NODES:-4}
# node k's GPU: k mod the GPUs there (4 nodes on 2 GPUs: 0,1,0,1); none on a
# CPU machine (BACKEND=mpi there tries the harness)
[ "$NG" -gt 0 ] && GPUS=${GPUS:-$(seq -s, 0 $((NODES - 1)) | tr , '\n' | \
    awk -v g="$NG" '{printf "%s%d", (NR > 1 ? "," : ""), $1 % g}')}
GPUS=${GPUS:-}
BACKEND=${BACKEND:-nccl}
RATE=${RATE:-1000}
{
    date -u +%FT%TZ; hostname; uname -r; nproc; cat /proc/loadavg; nvidia-smi -L
    mpirun --version | head -1
    for b in ip tc nsenter unshare; do printf '%s: %s\n' "$b" "$(command -v $b || echo missing)"; done
    # how names resolve here (a resolver that answers every name makes Open
    # MPI take every node for this one: testbed/gpunodes.py, _resolve_names)
    grep -v '^#' /etc/nsswitch.conf | grep hosts; grep -v '^#' /etc/resolv.conf
    timeout 10 getent hosts node2 nosuchname-ccbench; echo "getent rc=$?"
    env | grep -E '^(OMPI_MCA|PMIX|SLURM|PBS)' | sort
} >"$NODES_OUT/env.txt" 2>&1
if ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
    mkdir -p "$WORK/bin"
    for b in ip tc; do
        printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/.gnbin/lib exec %s/.gnbin/%s "$@"\n' \
            "$ROOT" "$ROOT" "$b" >"$WORK/bin/$b"
        chmod +x "$WORK/bin/$b"
    done
    export PATH=$WORK/bin:$PATH
    say "no iproute2 here: the carried ip and tc"
fi

# the probe: everything the harness needs, in namespaces of our own
P=ccbgnprobe$$
probe() {
    ip netns add ${P}a && ip netns add ${P}b && ip -n ${P}a link set lo up &&
    ip link add eth0 netns ${P}a type veth peer name p1 netns ${P}b &&
    ip -n ${P}b link add br0 type bridge && ip -n ${P}b link set p1 master br0 &&
    ip -n ${P}a link set eth0 up && ip -n ${P}b link set p1 up && ip -n ${P}b link set br0 up &&
    tc -n ${P}a qdisc replace dev eth0 root tbf rate 500mbit burst 18028 latency 50ms &&
    tc -n ${P}a qdisc show dev eth0 && nsenter --net=/run/netns/${P}a unshare --uts hostname
}
probe >>"$NODES_OUT/env.txt" 2>&1
PROBE=$?
tc -n ${P}a qdisc replace dev eth0 root netem delay 1ms >>"$NODES_OUT/env.txt" 2>&1 \
    && echo "netem: yes" >>"$NODES_OUT/env.txt" || echo "netem: no" >>"$NODES_OUT/env.txt"
ip netns del ${P}a 2>/dev/null; ip netns del ${P}b 2>/dev/null
echo "probe (netns, veth, bridge, tbf, uts): rc=$PROBE" | tee -a "$SUMMARY"
build_kit

# one run of the doctor over the nodes: label, then --slow NODE or "", then
# the doctor's arguments; NCCL's INFO lines in files per rank
nodes_run() {
    local label=$1 slow=$2; shift 2
    local t0=$SECONDS dbg=$WORK/nccl/$label
    mkdir -p "$dbg"
    NCCL_DEBUG=INFO NCCL_DEBUG_FILE=$dbg/%h.%p.log timeout "${RUN_LIMIT:-150}" $PY -m testbed.gpunodes \
        --nodes "$NODES" ${GPUS:+--gpus "$GPUS"} --rate "$RATE" ${slow:+--slow "$slow"} ${CHECK:-} -- \
        --backend "$BACKEND" --out "$WORK/$label.nc" "$@" >"$WORK/$label.out" 2>"$WORK/$label.err"
    local rc=$?
    local net other sock
    net=$(cat "$dbg"/*.log 2>/dev/null | grep -c "via NET/Socket")
    other=$(cat "$dbg"/*.log 2>/dev/null | grep " via " | grep -vc "via NET/Socket")
    sock=$(cat "$dbg"/*.log 2>/dev/null | grep -m1 -o "NET/Socket : Using .*")
    printf '%-24s rc=%s %4ss  %s | via NET/Socket: %s, via other: %s\n' "$label" "$rc" \
        "$((SECONDS - t0))" "$(tail -n 1 "$WORK/$label.out")" "$net" "$other" \
        | tee -a "$SUMMARY" "$LOG"
    [ -n "$sock" ] && echo "  $sock" >>"$SUMMARY"
    cat "$WORK/$label.out" "$WORK/$label.err" >>"$LOG"
}

if [ "$PROBE" = 0 ]; then
    say "nodes: $NODES, GPUs $GPUS, links $RATE Mbit/s"
    COMMON=(--repeats "${NODE_REPEATS:-5}" --bw-size "${BW_SIZE:-8M}" --bw-iters 3)
    for r in $(seq "${NODE_ROUNDS:-1}"); do
        [ $((SECONDS + 90)) -gt "${NODES_DEADLINE:-100000}" ] && { say "round $r: DEADLINE"; break; }
        K=$((1 + RANDOM % NODES)); J=$((1 + RANDOM % NODES))
        CHECK=$([ "$r" = 1 ] && echo --check-launch) nodes_run "matrix-clean-r$r" "" --no-bisect "${COMMON[@]}"
        nodes_run "matrix-node$K-half-r$r" "node$K" --no-bisect "${COMMON[@]}"
        if [ "$NODES" -ge 4 ]; then
            nodes_run "bisect-clean-r$r" "" --bisect "${COMMON[@]}"
            nodes_run "bisect-node$J-half-r$r" "node$J" --bisect "${COMMON[@]}"
        fi
    done
    ip netns list | grep -c ccbgn | sed 's/^/namespaces left: /' | tee -a "$SUMMARY"
else
    say "nodes: skipped, the probe failed (env.txt)"
fi
tar -C "$WORK" -czf "$NODES_OUT/nccl.tgz" nccl $(cd "$WORK" && ls *.out *.err 2>/dev/null) \
    && say "archive: $NODES_OUT/nccl.tgz"
if [ "${PAIRS:-1}" != 0 ] && [ "$NG" -ge 2 ]; then
    say "gpu_pairs (RUNS=${RUNS:-1})"
    CCB_BUILT=1 GPU_TESTS=0 DEADLINE=${PAIRS_LIMIT:-240} timeout $((${PAIRS_LIMIT:-240} + 60)) \
        bash "$ROOT/bench/gpu_pairs.sh" "$OUTDIR/pairs" >"$WORK/pairs.out" 2>&1
    echo "gpu_pairs: rc=$?" | tee -a "$SUMMARY"
fi
cat /proc/loadavg >>"$SUMMARY"
# gpu_setup's own log (the carried wheels' install) into ours: 8 files come back
[ -f "$OUTDIR/log.txt" ] && cat "$OUTDIR/log.txt" >>"$LOG" && rm -f "$OUTDIR/log.txt"
rm -rf "$WORK"
