/* all_reduce: count elements per rank, every rank ends with the reduction.
 * In-place: sendbuf == recvbuf.
 *
 * Every algorithm leaves bit-identical results on all ranks: each element is
 * reduced on one rank and copied to the others, or (recursive doubling) both
 * partners combine the same two operands in the same order (the lower
 * rank's first). */
#include <limits.h>
#include "coll.h"

static int allreduce_mpi(const ccb_args *a) {
    if (a->count > INT_MAX) return CCB_ERR_ARG;
    MPI_Op op = ccb_mpi_op(a->dtype, a->op);
    if (op == MPI_OP_NULL) return CCB_ERR_UNSUPPORTED;
    const void *s = a->sendbuf == a->recvbuf ? MPI_IN_PLACE : a->sendbuf;
    CCB_CHECK(MPI_Allreduce(s, a->recvbuf, (int)a->count, ccb_mpi_datatype(a->dtype), op, a->comm));
    int p;
    CCB_CHECK(MPI_Comm_size(a->comm, &p));
    return ccb_finish_avg(a->recvbuf, a->count, a->dtype, a->op, p);
}

/* Ring: reduce-scatter then all-gather, p − 1 steps each, on p nearly equal
 * blocks.  The reduce-scatter streams each block through small scratch slots
 * (ccb_reduce_exchange) and adds this rank's input straight into recvbuf,
 * so out-of-place needs no initial copy and the operands of every addition
 * are still in cache.  The all-gather moves finished blocks straight into
 * place. */
static int allreduce_ring(const ccb_args *a) {
    int p, r;
    CCB_CHECK(ccb_comm_info(a->comm, &r, &p));
    if (p == 1) return ccb_reduce_one_rank(a);
    size_t es = ccb_dtype_size(a->dtype), n = a->count;
    const char *in = a->sendbuf;
    char *out = a->recvbuf;
    int right = (r + 1) % p, left = (r - 1 + p) % p;
    for (int s = 0; s < p - 1; s++) {
        int sb = ccb_mod(r - s, p), rb = ccb_mod(r - s - 1, p);
        const char *src = (s == 0 ? in : out) + ccb_block_start(n, p, sb) * es;
        size_t off = ccb_block_start(n, p, rb) * es;
        CCB_CHECK(ccb_reduce_exchange(src, ccb_block_len(n, p, sb), right,
                                      in + off, out + off, ccb_block_len(n, p, rb), left, 0,
                                      a->scratch, a->scratch_bytes, 1, a));
    }
    int own = (r + 1) % p;
    CCB_CHECK(ccb_finish_avg(out + ccb_block_start(n, p, own) * es, ccb_block_len(n, p, own),
                             a->dtype, a->op, p));
    for (int s = 0; s < p - 1; s++) {
        int sb = ccb_mod(r + 1 - s, p), rb = ccb_mod(r - s, p);
        CCB_CHECK(ccb_sendrecv(out + ccb_block_start(n, p, sb) * es, ccb_block_len(n, p, sb) * es, right,
                               out + ccb_block_start(n, p, rb) * es, ccb_block_len(n, p, rb) * es, left,
                               CCB_TAG, a->comm));
    }
    return MPI_SUCCESS;
}

/* Fold the extra ranks of a non-power of two in (ccb_fold_*): an even rank
 * among the first 2(p − q) sends its input to the next rank and returns 1
 * (it only waits for the result, `unfold_wait`); the odd one reduces the
 * two inputs into recvbuf and points *cur there. */
static int fold_in(const ccb_args *a, int r, int p, const char **cur, int *sits_out) {
    int rem = p - ccb_pof2_floor(p);
    *cur = a->sendbuf;
    *sits_out = 0;
    if (r >= 2 * rem) return MPI_SUCCESS;
    if (!(r & 1)) {
        *sits_out = 1;
        return ccb_send_segments(a->sendbuf, a->count, r + 1, a);
    }
    *cur = a->recvbuf;
    return ccb_reduce_exchange(NULL, 0, MPI_PROC_NULL, a->sendbuf, a->recvbuf, a->count, r - 1, 1,
                               a->scratch, a->scratch_bytes, 1, a);
}

/* The odd rank of a folded pair hands the finished result to the even one. */
static int fold_out(const ccb_args *a, int r, int p, int sits_out) {
    size_t bytes = a->count * ccb_dtype_size(a->dtype);
    int rem = p - ccb_pof2_floor(p);
    if (r >= 2 * rem) return MPI_SUCCESS;
    if (sits_out) return ccb_recv(a->recvbuf, bytes, r + 1, CCB_TAG, a->comm);
    return ccb_send(a->recvbuf, bytes, r - 1, CCB_TAG, a->comm);
}

/* Recursive doubling: lg q exchanges of the whole vector with partner
 * v ^ mask, streamed through scratch slots; the first reads sendbuf, so no
 * copy of the input is made. */
static int allreduce_recursive_doubling(const ccb_args *a) {
    int p, r, out_of_game;
    CCB_CHECK(ccb_comm_info(a->comm, &r, &p));
    if (p == 1) return ccb_reduce_one_rank(a);
    size_t es = ccb_dtype_size(a->dtype), n = a->count;
    const char *cur;
    CCB_CHECK(fold_in(a, r, p, &cur, &out_of_game));
    if (!out_of_game) {
        int q = ccb_pof2_floor(p), v = ccb_fold_vrank(r, p);
        for (int mask = 1; mask < q; mask <<= 1) {
            int pv = v ^ mask, peer = ccb_fold_real(pv, p);
            CCB_CHECK(ccb_reduce_exchange(cur, n, peer, cur, a->recvbuf, n, peer, v > pv,
                                          a->scratch, a->scratch_bytes, 1, a));
            cur = a->recvbuf;
        }
        ccb_copy(a->recvbuf, cur, n * es);  /* only when q == 1 */
        CCB_CHECK(ccb_finish_avg(a->recvbuf, n, a->dtype, a->op, p));
    }
    return fold_out(a, r, p, out_of_game);
}

/* Rabenseifner: reduce-scatter by recursive halving, then all-gather by
 * recursive doubling, on the q-block partition of the vector.  Virtual rank
 * v ends the halving owning block v. */
static int allreduce_rabenseifner(const ccb_args *a) {
    int p, r, out_of_game;
    CCB_CHECK(ccb_comm_info(a->comm, &r, &p));
    if (p == 1) return ccb_reduce_one_rank(a);
    size_t es = ccb_dtype_size(a->dtype), n = a->count;
    const char *cur;
    char *out = a->recvbuf, *tmp = a->scratch;
    CCB_CHECK(fold_in(a, r, p, &cur, &out_of_game));
    if (!out_of_game) {
        int q = ccb_pof2_floor(p), v = ccb_fold_vrank(r, p), lo = 0, hi = q;
#define OFF(b) (ccb_block_start(n, q, (b)) * es)
        for (int mask = q / 2; mask >= 1; mask >>= 1) {
            int pv = v ^ mask, peer = ccb_fold_real(pv, p), mid = lo + (hi - lo) / 2;
            int klo = (v & mask) ? mid : lo, khi = (v & mask) ? hi : mid;
            int slo = (v & mask) ? lo : mid, shi = (v & mask) ? mid : hi;
            CCB_CHECK(ccb_reduce_exchange(cur + OFF(slo), (OFF(shi) - OFF(slo)) / es, peer,
                                          cur + OFF(klo), out + OFF(klo), (OFF(khi) - OFF(klo)) / es,
                                          peer, v > pv, tmp, a->scratch_bytes, 1, a));
            cur = out;
            lo = klo;
            hi = khi;
        }
        CCB_CHECK(ccb_finish_avg(out + OFF(v), ccb_block_len(n, q, v), a->dtype, a->op, p));
        for (int mask = 1; mask < q; mask <<= 1) {
            int pv = v ^ mask, peer = ccb_fold_real(pv, p);
            int mine = v & ~(mask - 1), theirs = pv & ~(mask - 1);
            CCB_CHECK(ccb_sendrecv(out + OFF(mine), OFF(mine + mask) - OFF(mine), peer,
                                   out + OFF(theirs), OFF(theirs + mask) - OFF(theirs), peer,
                                   CCB_TAG, a->comm));
        }
#undef OFF
    }
    return fold_out(a, r, p, out_of_game);
}

/* Tree: binomial reduce to rank 0, then binomial broadcast. */
static int allreduce_tree(const ccb_args *a) {
    int p, r;
    CCB_CHECK(ccb_comm_info(a->comm, &r, &p));
    size_t bytes = a->count * ccb_dtype_size(a->dtype);
    CCB_CHECK(ccb_reduce_binomial_raw(a, 0));
    if (r == 0) CCB_CHECK(ccb_finish_avg(a->recvbuf, a->count, a->dtype, a->op, p));
    return ccb_bcast_binomial_bytes(a->recvbuf, bytes, 0, a->comm);
}

/* Direct (mesh): every rank sends block j of its input to rank j at once,
 * reduces the p contributions to its own block, and sends that to everyone.
 * Input blocks go out of sendbuf as they are, partner blocks arrive in
 * scratch (p − 1 slots). */
static int allreduce_direct(const ccb_args *a) {
    int p, r;
    CCB_CHECK(ccb_comm_info(a->comm, &r, &p));
    if (p == 1) return ccb_reduce_one_rank(a);
    size_t es = ccb_dtype_size(a->dtype), n = a->count, stride = (n / (size_t)p + 1) * es;
    const char *in = a->sendbuf;
    char *out = a->recvbuf, *tmp = a->scratch;
    size_t mine = ccb_block_start(n, p, r) * es, len = ccb_block_len(n, p, r);
    ccb_reqs q;
    ccb_reqs_init(&q);
    int rc = MPI_SUCCESS;
    for (int k = 1; k < p && rc == MPI_SUCCESS; k++) {
        int src = (r - k + p) % p, dst = (r + k) % p;
        rc = ccb_irecv(&q, tmp + (size_t)(k - 1) * stride, len * es, src, CCB_TAG, a->comm);
        if (rc == MPI_SUCCESS)
            rc = ccb_isend(&q, in + ccb_block_start(n, p, dst) * es, ccb_block_len(n, p, dst) * es,
                           dst, CCB_TAG, a->comm);
    }
    if (rc == MPI_SUCCESS) rc = ccb_waitall(&q);
    /* own input first: in place, recvbuf's block is that input */
    if (rc == MPI_SUCCESS) rc = ccb_reduce3(in + mine, tmp, out + mine, len, a->dtype, a->op);
    for (int k = 2; k < p && rc == MPI_SUCCESS; k++)
        rc = ccb_reduce_local(tmp + (size_t)(k - 1) * stride, out + mine, len, a->dtype, a->op);
    if (rc == MPI_SUCCESS) rc = ccb_finish_avg(out + mine, len, a->dtype, a->op, p);
    for (int k = 1; k < p && rc == MPI_SUCCESS; k++) {
        int src = (r - k + p) % p, dst = (r + k) % p;
        rc = ccb_irecv(&q, out + ccb_block_start(n, p, src) * es, ccb_block_len(n, p, src) * es,
                       src, CCB_TAG, a->comm);
        if (rc == MPI_SUCCESS) rc = ccb_isend(&q, out + mine, len * es, dst, CCB_TAG, a->comm);
    }
    if (rc == MPI_SUCCESS) rc = ccb_waitall(&q);
    ccb_reqs_free(&q);
    return rc;
}

static size_t direct_scratch(size_t count, size_t elsize, int p) {
    return (size_t)(p > 1 ? p - 1 : 1) * (count / (size_t)p + 1) * elsize;
}

const ccb_algorithm ccb_all_reduce_algorithms[] = {
    {"mpi", allreduce_mpi, NULL},
    {"ring", allreduce_ring, ccb_scratch_block},
    {"recursive_doubling", allreduce_recursive_doubling, ccb_scratch_count},
    {"rabenseifner", allreduce_rabenseifner, ccb_scratch_count},
    {"tree", allreduce_tree, ccb_scratch_count},
    {"direct", allreduce_direct, direct_scratch},
    {NULL, NULL, NULL},
};
