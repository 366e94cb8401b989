// experiment C: peer-major stores and full passes without bounds checks
#include "devapi.cuh"

template <class E, bool CHECKED>
__device__ __forceinline__ void lsa_vec_pass(const DArgs &a, size_t base, size_t nw, int p) {
    typedef Lanes<E, W16> L;
    enum { U = 32 / L::N };
    L s[U];
    for (int r = 0; r < p; r++) {
        const W16 *src = lsa_array<W16>(a.send, a.send_offset, r);
        W16 v[U];
#pragma unroll
        for (int u = 0; u < U; u++)
            if (!CHECKED || base + 32 * u < nw) v[u] = src[base + 32 * u];
#pragma unroll
        for (int u = 0; u < U; u++)
            if (!CHECKED || base + 32 * u < nw) s[u].add(v[u]);
    }
    W16 w[U];
#pragma unroll
    for (int u = 0; u < U; u++) w[u] = s[u].get();
    for (int r = 0; r < p; r++) {
        W16 *dst = lsa_array<W16>(a.recv, a.recv_offset, r);
#pragma unroll
        for (int u = 0; u < U; u++)
            if (!CHECKED || base + 32 * u < nw) dst[base + 32 * u] = w[u];
    }
}

template <class E>
__device__ void lsa_vec(const DArgs &a) {
    typedef Lanes<E, W16> L;
    enum { U = 32 / L::N };
    CCB_LSA_SYNC(a, cuda::memory_order_acquire);
    const int p = a.comm.nRanks, lane = threadIdx.x % 32;
    const bool aligned = (a.send_offset | a.recv_offset) % sizeof(W16) == 0;
    const size_t nw = aligned ? a.count / L::N : 0;
    const size_t warp = threadIdx.x / 32 + (size_t)(blockDim.x / 32) * (a.comm.rank + (size_t)blockIdx.x * p);
    const size_t run = 32 * U, stride = (size_t)(blockDim.x / 32) * gridDim.x * p * run;
    size_t base = warp * run + lane;
    for (; base + 32 * (U - 1) < nw; base += stride) lsa_vec_pass<E, false>(a, base, nw, p);
    if (base < nw) lsa_vec_pass<E, true>(a, base, nw, p);
    lsa_elements<E>(a, nw * L::N);
    CCB_LSA_SYNC(a, cuda::memory_order_release);
}

CCB_DEVAPI_KERNELS(lsa_vec)
