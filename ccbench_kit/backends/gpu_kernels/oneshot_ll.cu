// One-shot all_reduce on LL lines: oneshot's data path without its barrier.
// Every 8 bytes of a rank's input travel with the call's flag (common.cuh's
// LL lines) into slot [me] of every peer's staging half; a rank sums line j
// (its own input and every slot's line j, in rank order, so every rank gets
// the same bits) once every slot's line j carries this call's flag.  A
// thread waits only for the lines it sums, and a rank for no one else.
// Each thread pushes all its lines before it waits for any: no rank waits
// on a line a peer has not been able to send.
#include "common.cuh"

template <class E, class W>
__device__ void oneshot_ll(const KArgs &a) {
    typedef typename E::T T;
    enum { PER = LLElems<T>::PER };
    const T *in = (const T *)a.send;
    T *out = (T *)a.recv;
    const u64 n = a.count, lines = ll_lines<T>(n), me = a.rank;
    const u64 first = (u64)blockIdx.x * blockDim.x + threadIdx.x,
              stride = (u64)gridDim.x * blockDim.x;
    const u32 num = call_number(a), flag = ll_flag(num);
    if (CCB_MOVES) {
        for (u64 j = first; j < lines; j += stride) {
            const LLData d = ll_pack(in, n, j);
            for (int r = 0; r < a.nranks; r++)
                if (r != a.rank) ll_store(staged<W16>(a, r, num, me * lines + j), d, flag);
        }
        for (u64 j = first; j < lines; j += stride) {
            float s[PER];
#pragma unroll
            for (int k = 0; k < PER; k++) s[k] = 0.f;
            for (int r = 0; r < a.nranks; r++) {
                LLElems<T> u;
                u.d = r == a.rank ? ll_pack(in, n, j)
                                  : ll_load(staged<W16>(a, a.rank, num, (u64)r * lines + j), flag);
#pragma unroll
                for (int k = 0; k < PER; k++) s[k] += E::load(u.t[k]);
            }
#pragma unroll
            for (int k = 0; k < PER; k++)
                if (j * PER + k < n) out[j * PER + k] = E::store(s[k]);
        }
    } else if (CCB_MEETS && threadIdx.x == 0 && blockIdx.x < lines) {
        // its phase `barrier`: what waiting for the peers costs, one empty
        // line a block (line blockIdx.x: a block never has more lines than that)
        for (int r = 0; r < a.nranks; r++)
            if (r != a.rank)
                ll_store(staged<W16>(a, r, num, me * lines + blockIdx.x), LLData{0, 0}, flag);
        for (int r = 0; r < a.nranks; r++)
            if (r != a.rank) ll_load(staged<W16>(a, a.rank, num, (u64)r * lines + blockIdx.x), flag);
    }
    call_end(a, num);
}

CCB_KERNELS(oneshot_ll)
