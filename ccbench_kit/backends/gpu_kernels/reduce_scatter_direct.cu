// Direct reduce_scatter: each rank copies its whole input (p parts) into its
// staging buffer, the ranks meet, rank r sums part r of every rank's staging
// buffer into its output, the ranks meet again.
#include "common.cuh"

template <class E, class W>
__device__ void reduce_scatter_direct(const KArgs &a) {
    const W *in = (const W *)a.send;
    W *out = (W *)a.recv, *mine = (W *)a.stage[a.rank];
    const u64 n = words<E, W>(a), me = a.rank;
    u32 epoch = epoch_load(a);
    CCB_FOR(i, n) {
        for (int c = 0; c < a.nranks; c++) mine[(u64)c * n + i] = in[(u64)c * n + i];
    }
    peer_barrier(a, epoch);
    CCB_FOR(i, n) {
        Lanes<E, W> s;
        for (int r = 0; r < a.nranks; r++) s.add(((const W *)a.stage[r])[me * n + i]);
        out[i] = s.get();
    }
    peer_barrier(a, epoch);
    epoch_store(a, epoch);
}

CCB_KERNELS(reduce_scatter_direct)
