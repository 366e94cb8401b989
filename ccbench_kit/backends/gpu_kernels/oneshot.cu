// One-shot all_reduce: each rank pushes its input into slot [me] of every
// peer's staging half, the ranks meet, each rank sums every rank's part (its
// own input and the slots, in rank order, so every rank gets the same bits)
// into its output.  One barrier: the halves alternate (common.cuh).
#include "common.cuh"

template <class E, class W>
__device__ void oneshot(const KArgs &a) {
    const W *in = (const W *)a.send;
    const u64 n = words<E, W>(a), me = a.rank;
    const u32 num = call_number(a);
    copy_words<W>(a, n, [&](int) { return in; },
                  [&](int r) { return staged<W>(a, r, num, me * n); }, [&](int) { return n; });
    peer_barrier(a, num, 1);
    sum_words<E, W>(
        a, n, [&](int r) { return r == a.rank ? in : staged<W>(a, a.rank, num, (u64)r * n); },
        (W *)a.recv, 0, [&](int) { return (W *)0; });
    call_end(a, num);
}

CCB_KERNELS(oneshot)
