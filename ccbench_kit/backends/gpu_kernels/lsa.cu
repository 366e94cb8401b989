// nccl-tests' -D 1 all_reduce, on NCCL's device API: after an LSA barrier,
// element i falls to one thread of one rank (the ranks interleave a block's
// width at a time), which reads it from every rank's send window, sums in
// rank order and stores the sum into every rank's receive window; a second
// barrier ends the call.  Every rank gets the same bits (one rank summed).
#include "devapi.cuh"

template <class E>
__device__ void lsa(const DArgs &a) {
    CCB_LSA_SYNC(a, cuda::memory_order_acquire);
    lsa_elements<E>(a, 0);
    CCB_LSA_SYNC(a, cuda::memory_order_release);
}

CCB_DEVAPI_KERNELS(lsa)
