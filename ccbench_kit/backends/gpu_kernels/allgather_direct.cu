// Direct all_gather: each rank copies its part into its staging buffer, the
// ranks meet, each rank reads every rank's part straight from that rank's
// staging buffer into its place in the output, the ranks meet again.
#include "common.cuh"

template <class E, class W>
__device__ void allgather_direct(const KArgs &a) {
    const W *in = (const W *)a.send;
    W *out = (W *)a.recv, *mine = (W *)a.stage[a.rank];
    const u64 n = words<E, W>(a);
    u32 epoch = epoch_load(a);
    CCB_FOR(i, n) mine[i] = in[i];
    peer_barrier(a, epoch);
    CCB_FOR(i, n) {
        for (int r = 0; r < a.nranks; r++) out[(u64)r * n + i] = ((const W *)a.stage[r])[i];
    }
    peer_barrier(a, epoch);
    epoch_store(a, epoch);
}

CCB_KERNELS(allgather_direct)
