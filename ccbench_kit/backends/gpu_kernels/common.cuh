// What every kernel of the kit's own GPU algorithms shares: the argument
// struct (ext/nccl_api.h's ccbn_kargs, the same layout), the element types
// (no CUDA header: NVRTC compiles this alone), the sum, and the barrier
// between the ranks' blocks in peer memory.
//
// Barrier: block b of every rank owns one epoch counter in its rank's own
// memory (`epochs[b]`), read at the kernel's start and written back at its
// end, so the flags never need a reset, in a CUDA graph as well.  Arriving
// at a barrier, block b raises its epoch and stores it, with system-scope
// release, into slot [b][me] of every rank's flags; it waits (acquire) until
// slot [b][r] of its own flags holds that epoch or more for every rank r.
// Only blocks of the same index meet, so every phase of a kernel must give
// element i to the same block: the loops below stride by i alone.

#define CCB_MAX_PEERS 8
#define CCB_MAX_BLOCKS 128

typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned short u16;

struct KArgs {
    u64 send, recv, count;
    u64 stage[CCB_MAX_PEERS];
    u64 signal[CCB_MAX_PEERS];
    u64 epochs;
    int rank, nranks;
};

// Element types: storage T, arithmetic in float (fp16/bf16 as NCCL's sum
// on sm_80+: combined in float32, rounded back once).
struct Fp32 {
    typedef float T;
    static __device__ __forceinline__ float load(T x) { return x; }
    static __device__ __forceinline__ T store(float v) { return v; }
};
struct Fp16 {
    typedef u16 T;
    static __device__ __forceinline__ float load(T x) {
        float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x)); return f;
    }
    static __device__ __forceinline__ T store(float v) {
        u16 h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v)); return h;
    }
};
struct Bf16 {
    typedef u16 T;
    static __device__ __forceinline__ float load(T x) { return __uint_as_float(((u32)x) << 16); }
    static __device__ __forceinline__ T store(float v) {
        u16 h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(v)); return h;
    }
};

static __device__ __forceinline__ u32 ld_acquire_sys(const u32 *p) {
    u32 v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

static __device__ __forceinline__ void st_release_sys(u32 *p, u32 v) {
    asm volatile("st.release.sys.global.u32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}

// Block blockIdx.x of every rank meets here; `epoch` is the block's counter.
static __device__ __forceinline__ void peer_barrier(const KArgs &a, u32 &epoch) {
    __syncthreads();
    epoch += 1;
    int t = threadIdx.x;
    if (t < a.nranks) {
        __threadfence_system();  // this block's stores, before the flag says so
        u32 *theirs = (u32 *)a.signal[t] + blockIdx.x * CCB_MAX_PEERS + a.rank;
        st_release_sys(theirs, epoch);
        const u32 *mine = (const u32 *)a.signal[a.rank] + blockIdx.x * CCB_MAX_PEERS + t;
        while ((int)(ld_acquire_sys(mine) - epoch) < 0) {
        }
    }
    __syncthreads();
}

static __device__ __forceinline__ u32 epoch_load(const KArgs &a) {
    return ((volatile u32 *)a.epochs)[blockIdx.x];
}

static __device__ __forceinline__ void epoch_store(const KArgs &a, u32 epoch) {
    if (threadIdx.x == 0) ((volatile u32 *)a.epochs)[blockIdx.x] = epoch;
}

// Words: a kernel moves elements one at a time (W = E::T) or 16 bytes at a
// time (W = W16, where every rank's buffers and the count allow it: the
// host picks the entry, the same on every rank).  Lanes<E, W> sums words.
struct alignas(16) W16 { u32 x, y, z, w; };

template <class E, class W>
struct Lanes {
    typedef typename E::T T;
    enum { N = sizeof(W) / sizeof(T) };
    float f[N];
    __device__ __forceinline__ Lanes() {
#pragma unroll
        for (int k = 0; k < N; k++) f[k] = 0.f;
    }
    __device__ __forceinline__ void add(const W &w) {
        const T *t = (const T *)&w;
#pragma unroll
        for (int k = 0; k < N; k++) f[k] += E::load(t[k]);
    }
    __device__ __forceinline__ W get() const {
        W w;
        T *t = (T *)&w;
#pragma unroll
        for (int k = 0; k < N; k++) t[k] = E::store(f[k]);
        return w;
    }
};

// The call's count in words.
template <class E, class W>
static __device__ __forceinline__ u64 words(const KArgs &a) {
    return a.count / Lanes<E, W>::N;
}

// Element i of a range of n, strided so that every phase gives it to the same block.
#define CCB_FOR(i, n) for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
                           i += (u64)gridDim.x * blockDim.x)

// Two extern "C" entries per element type, NAME_fp32 (an element a word)
// and NAME_fp32_v (16 bytes a word), and so for fp16 and bf16, around the
// algorithm's `template <class E, class W> __device__ void NAME(const KArgs &)`.
#define CCB_ENTRY(NAME, TYPE, E, W, SUFFIX)                                                  \
    extern "C" __global__ void __launch_bounds__(512) NAME##_##TYPE##SUFFIX(const KArgs a) { \
        NAME<E, W>(a);                                                                       \
    }
#define CCB_KERNELS(NAME)                                                                    \
    CCB_ENTRY(NAME, fp32, Fp32, float, ) CCB_ENTRY(NAME, fp32, Fp32, W16, _v)               \
    CCB_ENTRY(NAME, fp16, Fp16, u16, ) CCB_ENTRY(NAME, fp16, Fp16, W16, _v)                 \
    CCB_ENTRY(NAME, bf16, Bf16, u16, ) CCB_ENTRY(NAME, bf16, Bf16, W16, _v)
