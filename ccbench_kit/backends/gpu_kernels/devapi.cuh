// What the kernels written against NCCL's device API share (nccl-tests'
// -D kernels: LSA windows and LSA barriers): their one argument, compiled by
// nvcc (NCCL's device headers need CCCL's cuda/atomic, which NVRTC lacks),
// and their extern "C" entries.  The element types and the sum in float are
// common.cuh's, as for the kit's peer-memory kernels.
#include <nccl.h>
#include <nccl_device.h>

#ifdef __CUDACC__
#include "common.cuh"
#endif

// The kernel's one argument; devapi_host.cpp fills it on the host, so both
// sides compile this one definition.
struct DArgs {
    ncclWindow_t send, recv;   // symmetric windows (-R 2) holding the buffers
    size_t send_offset, recv_offset;  // bytes from each window's start
    size_t count;              // elements
    ncclDevComm comm;          // ncclDevCommCreate's, lsaBarrierCount = the grid
};

#ifdef __CUDACC__
// Every block meets the same block of every rank of the LSA team (one
// barrier a block: lsaBarrierCount is the grid), with `order` semantics.
#define CCB_LSA_SYNC(a, order)                                                              \
    do {                                                                                    \
        ncclLsaBarrierSession<ncclCoopCta> bar_{ncclCoopCta(), (a).comm, ncclTeamLsa((a).comm), \
                                                (a).comm.lsaBarrier, blockIdx.x};           \
        bar_.sync(ncclCoopCta(), order);                                                    \
    } while (0)

// Rank `peer`'s element array of window `w` (LSA rank = rank: the host
// refuses a communicator whose ranks are not all in one LSA team).
template <class T>
static __device__ __forceinline__ T *lsa_array(ncclWindow_t w, size_t offset, int peer) {
    return (T *)ncclGetLsaPointer(w, offset, peer);
}

// Elements [from, count) one a thread (nccl-tests' -D 1 way): element i falls
// to one thread of one rank (the ranks interleave a block's width at a
// time), which reads it from every rank's send window, sums in rank order and
// stores the sum into every rank's receive window.
template <class E>
static __device__ __forceinline__ void lsa_elements(const DArgs &a, size_t from) {
    typedef typename E::T T;
    const int p = a.comm.nRanks;
    const size_t stride = (size_t)blockDim.x * gridDim.x * p;
    for (size_t i = from + threadIdx.x + (size_t)blockDim.x * (a.comm.rank + (size_t)blockIdx.x * p);
         i < a.count; i += stride) {
        float v = 0.f;
        for (int r = 0; r < p; r++) v += E::load(lsa_array<T>(a.send, a.send_offset, r)[i]);
        const T s = E::store(v);
        for (int r = 0; r < p; r++) lsa_array<T>(a.recv, a.recv_offset, r)[i] = s;
    }
}

// One entry per element type, NAME_fp32, NAME_fp16, NAME_bf16, around the
// algorithm's `template <class E> __device__ void NAME(const DArgs &)`.
#define CCB_DEVAPI_ENTRY(NAME, TYPE, E)                                                     \
    extern "C" __global__ void __launch_bounds__(512) NAME##_##TYPE(const DArgs a) {        \
        NAME<E>(a);                                                                         \
    }
#define CCB_DEVAPI_KERNELS(NAME)                                                            \
    CCB_DEVAPI_ENTRY(NAME, fp32, Fp32) CCB_DEVAPI_ENTRY(NAME, fp16, Fp16)                   \
    CCB_DEVAPI_ENTRY(NAME, bf16, Bf16)
#endif
