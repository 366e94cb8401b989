// One-shot all_reduce: each rank copies its input into its staging buffer,
// the ranks meet, each rank sums every rank's staging buffer (in rank
// order, so every rank gets the same bits) into its output, the ranks meet
// again (no rank refills its staging buffer while a peer still reads it).
#include "common.cuh"

template <class E, class W>
__device__ void oneshot(const KArgs &a) {
    const W *in = (const W *)a.send;
    W *out = (W *)a.recv, *mine = (W *)a.stage[a.rank];
    const u64 n = words<E, W>(a);
    u32 epoch = epoch_load(a);
    CCB_FOR(i, n) mine[i] = in[i];
    peer_barrier(a, epoch);
    CCB_FOR(i, n) {
        Lanes<E, W> s;
        for (int r = 0; r < a.nranks; r++) s.add(((const W *)a.stage[r])[i]);
        out[i] = s.get();
    }
    peer_barrier(a, epoch);
    epoch_store(a, epoch);
}

CCB_KERNELS(oneshot)
