// Direct reduce_scatter: each rank copies its whole input (p parts) into its
// staging buffer, the ranks meet, rank r sums part r of every rank's staging
// buffer into its output, the ranks meet again.
#include "common.cuh"

template <class E>
__device__ void reduce_scatter_direct(const KArgs &a) {
    typedef typename E::T T;
    const T *in = (const T *)a.send;
    T *out = (T *)a.recv, *mine = (T *)a.stage[a.rank];
    const u64 n = a.count, me = a.rank;
    u32 epoch = epoch_load(a);
    CCB_FOR(i, n) {
        for (int c = 0; c < a.nranks; c++) mine[(u64)c * n + i] = in[(u64)c * n + i];
    }
    peer_barrier(a, epoch);
    CCB_FOR(i, n) {
        float s = 0.f;
        for (int r = 0; r < a.nranks; r++) s += E::load(((const T *)a.stage[r])[me * n + i]);
        out[i] = E::store(s);
    }
    peer_barrier(a, epoch);
    epoch_store(a, epoch);
}

CCB_KERNELS(reduce_scatter_direct)
