# Sourced by the device-call scripts (bench/gpu_parity.sh, gpu_doctor.sh,
# gpu_multi_doctor.sh) with NAME set and the output folder as "$1" (default
# $OUT): sets ROOT, OUTDIR, WORK (a fresh temporary folder), PY and LOG, the
# environment every GPU run keeps (never NVLink multicast on shared hosts;
# Open MPI as root), `say`, the carried wheels (.whl/*.whl: h5netcdf) and
# `build_kit` (the extensions, built on the device).
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUTDIR=${1:-${OUT:-/tmp/ccbench-$NAME}}
WORK=$(mktemp -d "/tmp/ccbench-$NAME.XXXX")
PY=${PYTHON:-python3}
mkdir -p "$OUTDIR"
LOG=$OUTDIR/log.txt
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1
cd "$ROOT"
say() { echo "[$(date +%T)] $*" | tee -a "$LOG"; }
if ls .whl/*.whl >/dev/null 2>&1; then
    $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/ccb-site .whl/*.whl >>"$LOG" 2>&1
    export PYTHONPATH=/tmp/ccb-site
fi
export PYTHONPATH=$ROOT:${PYTHONPATH:-}
build_kit() {
    # a script run from another (gpu_round3.sh) finds the extensions built
    [ "${CCB_BUILT:-}" = 1 ] && { say "build: done by the caller"; return; }
    say "build"
    timeout 240 $PY setup.py -q build_ext --inplace -j "$(nproc)" >"$WORK/build.log" 2>&1
    say "build rc=$?"; tail -5 "$WORK/build.log" >>"$LOG"
}
# NCCL_HOME for building nccl-tests: the wheel the kit loads (its nccl_lib
# search), with the unversioned link the linker wants; both sides then load
# one libnccl (LD_LIBRARY_PATH).  Sets NCCL_LIB and NCCL_DIR.
nccl_home() {
    NCCL_LIB=$($PY -c "from ccbench_kit.backends import nccl_lib; print(nccl_lib.find('nccl').path)")
    NCCL_DIR=$(dirname "$(dirname "$NCCL_LIB")")
    mkdir -p "$WORK/ncclhome/lib"
    ln -s "$NCCL_DIR/include" "$WORK/ncclhome/include"
    ln -s "$NCCL_LIB" "$WORK/ncclhome/lib/libnccl.so"
    echo "libnccl (kit and nccl-tests): $NCCL_LIB" | tee -a "$SUM"
    export LD_LIBRARY_PATH=$(dirname "$NCCL_LIB"):${LD_LIBRARY_PATH:-}
}
# nccl-tests' all_reduce_perf from the source folder $1, built in the
# background into $WORK/nt against the libnccl the kit loads (call nccl_home
# first) and the MPI found (none: MPI=0); the build's log is $2.  Sets
# NT_PID (`wait $NT_PID` before timing, so the build loads no timed run) and
# NT_MPI (1: one all_reduce_perf process a GPU under mpirun; 0: -g N).
nccl_tests_build() {
    local mpiflags="MPI=0"
    NT_MPI=0
    if command -v mpicc >/dev/null; then
        NT_MPI=1
        mkdir -p "$WORK/mpihome"
        ln -s "$(mpicc --showme:incdirs | awk '{print $1}')" "$WORK/mpihome/include"
        ln -s "$(mpicc --showme:libdirs | awk '{print $1}')" "$WORK/mpihome/lib"
        mpiflags="MPI=1 MPI_HOME=$WORK/mpihome"
    fi
    cp -a "$1" "$WORK/nccl-tests"
    say "nccl-tests build ($mpiflags)"
    ( cd "$WORK/nccl-tests/src" && timeout 400 make -j"$(nproc)" $mpiflags \
        NCCL_HOME="$WORK/ncclhome" NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" \
        BUILDDIR="$WORK/nt" "$WORK/nt/all_reduce_perf" ) >"$2" 2>&1 &
    NT_PID=$!
}
