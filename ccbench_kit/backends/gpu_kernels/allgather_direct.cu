// Direct all_gather: each rank copies its part into its staging buffer, the
// ranks meet, each rank reads every rank's part straight from that rank's
// staging buffer into its place in the output, the ranks meet again.
#include "common.cuh"

template <class E>
__device__ void allgather_direct(const KArgs &a) {
    typedef typename E::T T;
    const T *in = (const T *)a.send;
    T *out = (T *)a.recv, *mine = (T *)a.stage[a.rank];
    const u64 n = a.count;
    u32 epoch = epoch_load(a);
    CCB_FOR(i, n) mine[i] = in[i];
    peer_barrier(a, epoch);
    CCB_FOR(i, n) {
        for (int r = 0; r < a.nranks; r++) out[(u64)r * n + i] = ((const T *)a.stage[r])[i];
    }
    peer_barrier(a, epoch);
    epoch_store(a, epoch);
}

CCB_KERNELS(allgather_direct)
