// Direct all_gather: each rank pushes its part into slot [me] of every
// peer's staging half and copies it to its own place in the output (unless
// in place), the ranks meet, each rank copies every slot to its place.  One
// barrier: the halves alternate (common.cuh).
#include "common.cuh"

template <class E, class W>
__device__ void allgather_direct(const KArgs &a) {
    const W *in = (const W *)a.send;
    W *out = (W *)a.recv;
    const u64 n = words<E, W>(a), me = a.rank;
    const u32 num = call_number(a);
    auto all = [&](int) { return n; };
    copy_words<W>(a, n, [&](int) { return in; },
                  [&](int r) { return staged<W>(a, r, num, me * n); }, all);
    if (out + me * n != in) {
        CCB_WORDS(n, {
#pragma unroll
            for (int u = 0; u < CCB_UNROLL; u++)
                if (ok[u]) out[me * n + i[u]] = in[i[u]];
        })
    }
    peer_barrier(a, num, 1);
    copy_words<W>(a, n, [&](int r) { return staged<W>(a, a.rank, num, (u64)r * n); },
                  [&](int r) { return out + (u64)r * n; }, all);
    call_end(a, num);
}

CCB_KERNELS(allgather_direct)
