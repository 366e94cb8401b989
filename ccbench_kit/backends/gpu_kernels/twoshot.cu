// Two-shot all_reduce: a reduce-scatter then an all-gather, both pushed.
// Rank c owns chunk c: each rank pushes its chunk c into slot [me] of rank
// c's staging half; the ranks meet; rank c sums chunk c (its own input and
// the slots, in rank order) into its output and pushes the sum into every
// peer's result area; the ranks meet; each rank copies the other chunks
// from its result area.  Two barriers: the halves alternate (common.cuh).
#include "common.cuh"

template <class E, class W>
__device__ void twoshot(const KArgs &a) {
    const W *in = (const W *)a.send;
    W *out = (W *)a.recv;
    const u64 n = words<E, W>(a), p = a.nranks, me = a.rank, chunk = (n + p - 1) / p;
    const u64 results = p * chunk;  // the result area, after the p slots
    const u32 num = call_number(a);
    auto len = [&](int c) -> u64 {  // words of chunk c (the last may be short or empty)
        u64 start = (u64)c * chunk;
        return start >= n ? 0 : (n - start < chunk ? n - start : chunk);
    };
    copy_words<W>(a, chunk, [&](int c) { return in + (u64)c * chunk; },
                  [&](int c) { return staged<W>(a, c, num, me * chunk); }, len);
    peer_barrier(a, num, 1);
    sum_words<E, W>(
        a, len(a.rank),
        [&](int r) { return r == a.rank ? in + me * chunk : staged<W>(a, a.rank, num, r * chunk); },
        out + me * chunk, a.nranks - 1,
        [&](int k) { return staged<W>(a, k < a.rank ? k : k + 1, num, results + me * chunk); });
    peer_barrier(a, num, 2);
    copy_words<W>(a, chunk, [&](int c) { return staged<W>(a, a.rank, num, results + c * chunk); },
                  [&](int c) { return out + (u64)c * chunk; }, len);
    call_end(a, num);
}

CCB_KERNELS(twoshot)
