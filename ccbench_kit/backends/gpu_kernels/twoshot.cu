// Two-shot all_reduce: each rank copies its input into its staging buffer;
// the ranks meet; rank r sums chunk r of every rank's staging buffer, into
// its output and back into its own staging buffer (only rank r reads chunk r
// of anyone's in this phase); the ranks meet; each rank copies every other
// chunk from the rank that reduced it; the ranks meet again.
#include "common.cuh"

template <class E, class W>
__device__ void twoshot(const KArgs &a) {
    const W *in = (const W *)a.send;
    W *out = (W *)a.recv, *mine = (W *)a.stage[a.rank];
    const u64 n = words<E, W>(a), p = a.nranks, chunk = (n + p - 1) / p;
    u32 epoch = epoch_load(a);
    CCB_FOR(i, chunk) {
        for (u64 c = 0; c < p; c++) {
            u64 e = c * chunk + i;
            if (e < n) mine[e] = in[e];
        }
    }
    peer_barrier(a, epoch);
    CCB_FOR(i, chunk) {
        u64 e = (u64)a.rank * chunk + i;
        if (e < n) {
            Lanes<E, W> s;
            for (int r = 0; r < a.nranks; r++) s.add(((const W *)a.stage[r])[e]);
            W v = s.get();
            mine[e] = v;
            out[e] = v;
        }
    }
    peer_barrier(a, epoch);
    CCB_FOR(i, chunk) {
        for (int c = 0; c < a.nranks; c++) {
            u64 e = (u64)c * chunk + i;
            if (c != a.rank && e < n) out[e] = ((const W *)a.stage[c])[e];
        }
    }
    peer_barrier(a, epoch);
    epoch_store(a, epoch);
}

CCB_KERNELS(twoshot)
