// Direct reduce_scatter: each rank pushes its part c into slot [me] of rank
// c's staging half, the ranks meet, each rank sums its part (its own input
// and the slots, in rank order) into its output.  One barrier: the halves
// alternate (common.cuh).
#include "common.cuh"

template <class E, class W>
__device__ void reduce_scatter_direct(const KArgs &a) {
    const W *in = (const W *)a.send;
    const u64 n = words<E, W>(a), me = a.rank;
    const u32 num = call_number(a);
    copy_words<W>(a, n, [&](int c) { return in + (u64)c * n; },
                  [&](int c) { return staged<W>(a, c, num, me * n); }, [&](int) { return n; });
    peer_barrier(a, num, 1);
    sum_words<E, W>(
        a, n,
        [&](int r) { return r == a.rank ? in + me * n : staged<W>(a, a.rank, num, (u64)r * n); },
        (W *)a.recv, 0, [&](int) { return (W *)0; });
    call_end(a, num);
}

CCB_KERNELS(reduce_scatter_direct)
