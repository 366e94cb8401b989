// One-shot all_reduce: each rank copies its input into its staging buffer,
// the ranks meet, each rank sums every rank's staging buffer (in rank
// order, so every rank gets the same bits) into its output, the ranks meet
// again (no rank refills its staging buffer while a peer still reads it).
#include "common.cuh"

template <class E>
__device__ void oneshot(const KArgs &a) {
    typedef typename E::T T;
    const T *in = (const T *)a.send;
    T *out = (T *)a.recv, *mine = (T *)a.stage[a.rank];
    u32 epoch = epoch_load(a);
    CCB_FOR(i, a.count) mine[i] = in[i];
    peer_barrier(a, epoch);
    CCB_FOR(i, a.count) {
        float s = 0.f;
        for (int r = 0; r < a.nranks; r++) s += E::load(((const T *)a.stage[r])[i]);
        out[i] = E::store(s);
    }
    peer_barrier(a, epoch);
    epoch_store(a, epoch);
}

CCB_KERNELS(oneshot)
