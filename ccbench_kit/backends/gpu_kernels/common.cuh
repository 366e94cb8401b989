// What every kernel of the kit's own GPU algorithms shares: the argument
// struct (ext/nccl_api.h's ccbn_kargs, the same layout), the element types
// (no CUDA header: NVRTC compiles this alone), the sum, the call number,
// the staging slots and the barrier between the ranks' blocks.
//
// Data moves by push: a rank stores what a peer needs straight into that
// peer's staging buffer (NVLink stores are posted: no round trip before the
// next one), meets it at a barrier, and then reads only its own memory.
//
// Call number: every rank counts its calls of the own kernels (`seq[0]` in
// its own memory; the last block of a call to finish raises it, `seq[1]`
// counting the blocks done), so every block of every rank knows the same
// number without the host (a CUDA graph replays the same arguments).
//
// Staging: each rank's buffer has two halves of `half` bytes; a call uses
// half (number & 1).  So no call needs a closing barrier: rank B stores into
// rank A's half h at call k+2 only after every block of its call k+1 met
// A's at their barrier, so A was in call k+1 and had finished call k, the
// last to use half h; and call k+1 uses the other half.  This holds across
// sizes, grids and kernels, since `half` is fixed while the buffer lives.
//
// Barrier: block b of every rank meets block b of every other: it stores
// 4 * number + phase, with system-scope release, into slot [b][me] of every
// rank's flags and waits (acquire) until slot [b][r] of its own flags holds
// that much or more for every rank r.  Values only grow, so the flags never
// need a reset.  Only blocks of the same index meet, so every phase of a
// kernel gives word i to the same block: CCB_WORDS below is the one mapping.

// Phases: the kit times each kernel's phases alone, to say where its time
// goes (``--algorithms NAME:launch,NAME:barrier``): the same source compiled
// with CCB_PHASES 0 (the launch and the call's bookkeeping, no barrier, no
// data) and 1 (its barriers too, no data); the whole kernel is 3.  No data
// moves in either, so they need no staging half; a whole call after one is
// safe because the harness syncs the stream and the ranks between loops.
#ifndef CCB_PHASES
#define CCB_PHASES 3
#endif
#define CCB_MEETS (CCB_PHASES & 1)
#define CCB_MOVES (CCB_PHASES & 2)

#define CCB_MAX_PEERS 8
#define CCB_MAX_BLOCKS 128
#define CCB_UNROLL 4  // words a thread has in flight: loads issued before their stores

typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned short u16;

struct KArgs {
    u64 send, recv, count;
    u64 stage[CCB_MAX_PEERS];
    u64 signal[CCB_MAX_PEERS];
    u64 seq, half;
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

// Release is cumulative: the stores of every thread of the block, ordered
// before it by the __syncthreads, are visible to whoever acquires the flag
// (a __threadfence_system before it only cost time).
static __device__ __forceinline__ void st_release_sys(u32 *p, u32 v) {
    asm volatile("st.release.sys.global.u32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}

// This call's number, the same on every rank (read before any block ends).
static __device__ __forceinline__ u32 call_number(const KArgs &a) {
    return ((volatile u32 *)a.seq)[0];
}

// The call's end: the last block to finish raises the number for the next
// call (a kernel later on the stream sees both stores).
static __device__ __forceinline__ void call_end(const KArgs &a, u32 number) {
    __syncthreads();
    if (threadIdx.x == 0) {
        u32 *seq = (u32 *)a.seq;
        if (atomicAdd(seq + 1, 1u) == gridDim.x - 1) {
            seq[1] = 0;
            seq[0] = number + 1;
        }
    }
}

// Block blockIdx.x of every rank meets here, at phase 1, 2 or 3 of the call.
static __device__ __forceinline__ void peer_barrier(const KArgs &a, u32 number, u32 phase) {
    if (!CCB_MEETS) return;
    __syncthreads();
    const u32 value = number * 4u + phase;
    int t = threadIdx.x;
    if (t < a.nranks) {
        u32 *theirs = (u32 *)a.signal[t] + blockIdx.x * CCB_MAX_PEERS + a.rank;
        st_release_sys(theirs, value);
        const u32 *mine = (const u32 *)a.signal[a.rank] + blockIdx.x * CCB_MAX_PEERS + t;
        while ((int)(ld_acquire_sys(mine) - value) < 0) {
        }
    }
    __syncthreads();
}

// Rank `owner`'s staging half of this call, as words, `offset` words in.
template <class W>
static __device__ __forceinline__ W *staged(const KArgs &a, int owner, u32 number, u64 offset) {
    return (W *)(a.stage[owner] + (number & 1u) * a.half) + offset;
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

// The words i of [0, n) this thread handles, CCB_UNROLL at a time: the
// body (the macro's last arguments: it may hold commas) runs with `i[u]`
// (u < CCB_UNROLL) and `ok[u]` (i[u] < n).  The grid's threads take one
// word each before any takes a second (u strides by the grid), so a call
// of w words keeps min(w / blockDim, grid) blocks busy, each one short.
// Every phase of every kernel uses this mapping, so word i always falls to
// the same block.
#define CCB_WORDS(n, ...)                                                                    \
    for (u64 base_ = (u64)blockIdx.x * blockDim.x + threadIdx.x; base_ < (n);                 \
         base_ += (u64)gridDim.x * blockDim.x * CCB_UNROLL) {                                 \
        u64 i[CCB_UNROLL];                                                                    \
        bool ok[CCB_UNROLL];                                                                  \
        _Pragma("unroll") for (int u = 0; u < CCB_UNROLL; u++) {                              \
            i[u] = base_ + (u64)u * gridDim.x * blockDim.x;                                   \
            ok[u] = i[u] < (n);                                                               \
        }                                                                                     \
        __VA_ARGS__                                                                           \
    }

// For every rank r but this one: dst(r)[i] = src(r)[i] for the words
// i < len(r) (a push to the peers, or a local copy of what they pushed),
// CCB_UNROLL loads in flight before their stores; `n` bounds every len(r).
template <class W, class Src, class Dst, class Len>
static __device__ __forceinline__ void copy_words(const KArgs &a, u64 n, Src src, Dst dst,
                                                  Len len) {
    if (!CCB_MOVES) return;
    CCB_WORDS(n, {
#pragma unroll
        for (int r = 0; r < CCB_MAX_PEERS; r++) {
            if (r >= a.nranks) break;
            if (r == a.rank) continue;
            const W *from = src(r);
            W *to = dst(r);
            const u64 m = len(r);
            W v[CCB_UNROLL];
#pragma unroll
            for (int u = 0; u < CCB_UNROLL; u++)
                if (i[u] < m) v[u] = from[i[u]];
#pragma unroll
            for (int u = 0; u < CCB_UNROLL; u++)
                if (i[u] < m) to[i[u]] = v[u];
        }
    })
}

// out[i] = the sum over ranks r, in rank order (every rank gets the same
// bits), of src(r)[i]; then each of `also` (up to `nalso` word arrays, or
// none) gets the sum too.
template <class E, class W, class Src, class Also>
static __device__ __forceinline__ void sum_words(const KArgs &a, u64 n, Src src, W *out,
                                                 int nalso, Also also) {
    if (!CCB_MOVES) return;
    CCB_WORDS(n, {
        Lanes<E, W> s[CCB_UNROLL];
#pragma unroll
        for (int r = 0; r < CCB_MAX_PEERS; r++) {
            if (r >= a.nranks) break;
            const W *from = src(r);
            W v[CCB_UNROLL];
#pragma unroll
            for (int u = 0; u < CCB_UNROLL; u++)
                if (ok[u]) v[u] = from[i[u]];
#pragma unroll
            for (int u = 0; u < CCB_UNROLL; u++)
                if (ok[u]) s[u].add(v[u]);
        }
#pragma unroll
        for (int u = 0; u < CCB_UNROLL; u++) {
            if (!ok[u]) continue;
            W w = s[u].get();
            out[i[u]] = w;
            for (int k = 0; k < nalso; k++) also(k)[i[u]] = w;
        }
    })
}

// LL lines (NCCL's LL protocol): 8 bytes of data travel with the call's
// flag in one 16-byte store, {data, flag, data, flag}, each 8-byte half
// landing whole (NCCL relies on the same); a reader spins on its own memory
// until both flags are this call's, then has the data: no barrier, no
// fence, twice the bytes.  The flag is the call number + 1, never 0 (a
// fresh buffer holds 0; where the number wraps, calls 2^32 - 1 and 0 both
// flag 1, in different halves).  Only LL lines may ever be stored where LL
// lines are read (any other data could look like a flag): a kernel using
// them names its own staging buffer (``STAGE`` in its NAME.py), where the
// numbers only grow.
struct LLData { u32 lo, hi; };

// A line's data as its elements of type T (8 / sizeof(T) of them).
template <class T>
union LLElems {
    enum { PER = 8 / sizeof(T) };
    LLData d;
    T t[PER];
};

static __device__ __forceinline__ u32 ll_flag(u32 number) { return number + 1u ? number + 1u : 1u; }

static __device__ __forceinline__ void ll_store(void *line, LLData d, u32 flag) {
    asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};"
                 :: "l"(line), "r"(d.lo), "r"(flag), "r"(d.hi), "r"(flag) : "memory");
}

static __device__ __forceinline__ LLData ll_load(const void *line, u32 flag) {
    u32 lo, f1, hi, f2;
    do {
        asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(lo), "=r"(f1), "=r"(hi), "=r"(f2) : "l"(line) : "memory");
    } while (f1 != flag || f2 != flag);
    return LLData{lo, hi};
}

// The lines n elements of type T take.
template <class T>
static __device__ __forceinline__ u64 ll_lines(u64 n) {
    return (n * sizeof(T) + 7) / 8;
}

// Line j of `src` (n elements, any alignment): its elements, zeros past n.
template <class T>
static __device__ __forceinline__ LLData ll_pack(const T *src, u64 n, u64 j) {
    LLElems<T> u;
#pragma unroll
    for (int k = 0; k < LLElems<T>::PER; k++) {
        const u64 e = j * LLElems<T>::PER + k;
        u.t[k] = e < n ? src[e] : (T)0;
    }
    return u.d;
}

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
