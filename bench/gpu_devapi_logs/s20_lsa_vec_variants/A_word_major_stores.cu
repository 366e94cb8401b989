// nccl-tests' -D 2 all_reduce: -D 1 (lsa.cu) with 16-byte words, each thread
// keeping 128 bytes of loads in flight from a peer before it sums them.  A
// warp takes a run of consecutive words (lane + 32 u), the ranks interleave
// a warp's run at a time; what is left over (the count's last partial word,
// or a whole call whose windows' offsets are not 16-byte aligned) goes one
// element a thread, as in -D 1.  (Splitting the grid's full passes from a
// bounds-checked last one, as nccl-tests does, measured 6-16 % slower from
// 8 MiB on 2x H200: bench/RESULTS.md.)
#include "devapi.cuh"

template <class E>
__device__ void lsa_vec(const DArgs &a) {
    typedef Lanes<E, W16> L;
    enum { U = 32 / L::N };  // words in flight a thread: 128 bytes of fp32, 64 of fp16/bf16
    CCB_LSA_SYNC(a, cuda::memory_order_acquire);
    const int p = a.comm.nRanks, lane = threadIdx.x % 32;
    const bool aligned = (a.send_offset | a.recv_offset) % sizeof(W16) == 0;
    const size_t nw = aligned ? a.count / L::N : 0;
    const size_t warp = threadIdx.x / 32 + (size_t)(blockDim.x / 32) * (a.comm.rank + (size_t)blockIdx.x * p);
    const size_t run = 32 * U, warps = (size_t)(blockDim.x / 32) * gridDim.x * p;
    for (size_t base = warp * run + lane; base < nw; base += warps * run) {
        L s[U];
        for (int r = 0; r < p; r++) {
            const W16 *src = lsa_array<W16>(a.send, a.send_offset, r);
            W16 v[U];
#pragma unroll
            for (int u = 0; u < U; u++)
                if (base + 32 * u < nw) v[u] = src[base + 32 * u];
#pragma unroll
            for (int u = 0; u < U; u++)
                if (base + 32 * u < nw) s[u].add(v[u]);
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            if (base + 32 * u >= nw) continue;
            const W16 w = s[u].get();
            for (int r = 0; r < p; r++) lsa_array<W16>(a.recv, a.recv_offset, r)[base + 32 * u] = w;
        }
    }
    lsa_elements<E>(a, nw * L::N);
    CCB_LSA_SYNC(a, cuda::memory_order_release);
}

CCB_DEVAPI_KERNELS(lsa_vec)
