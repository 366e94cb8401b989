/* reduce_scatter: sendbuf holds p blocks of count elements; rank r ends with
 * block r reduced over all ranks.  In-place (nccl-tests' layout): recvbuf is
 * block r of sendbuf. */
#include <limits.h>
#include "coll.h"

#define NSLOTS 2

int ccb_ring_reduce_step(const void *src, size_t slen, int right,
                         const void *in, void *out, size_t rlen, int left,
                         void *stage, size_t stage_bytes, int reuse, const ccb_args *a) {
    size_t es = ccb_dtype_size(a->dtype), seg = ccb_segment_bytes(a);
    size_t ks = ccb_nseg(slen * es, seg), kr = ccb_nseg(rlen * es, seg);
    size_t stride = (rlen / kr + 1) * es;
    int slots = reuse && kr > NSLOTS && NSLOTS * stride <= stage_bytes;
    const char *s = src, *x = in;
    char *o = out, *st = stage;
#define RSTART(j) (ccb_block_start(rlen, (int)kr, (int)(j)) * es)
#define RLEN(j) (ccb_block_len(rlen, (int)kr, (int)(j)) * es)
#define RPTR(j) (st + (slots ? ((j) % NSLOTS) * stride : RSTART(j)))
    MPI_Request rq[NSLOTS];
    ccb_reqs sq;
    ccb_reqs_init(&sq);
    int rc = MPI_SUCCESS;
    for (size_t j = 0; j < kr && j < NSLOTS && rc == MPI_SUCCESS; j++)
        rc = MPI_Irecv(RPTR(j), (int)RLEN(j), MPI_BYTE, left, CCB_TAG, a->comm, &rq[j]);
    for (size_t j = 0; j < ks && rc == MPI_SUCCESS; j++)
        rc = ccb_isend(&sq, s + ccb_block_start(slen, (int)ks, (int)j) * es,
                       ccb_block_len(slen, (int)ks, (int)j) * es, right, CCB_TAG, a->comm);
    for (size_t j = 0; j < kr && rc == MPI_SUCCESS; j++) {
        rc = MPI_Wait(&rq[j % NSLOTS], MPI_STATUS_IGNORE);
        if (rc == MPI_SUCCESS)
            rc = ccb_reduce3(x + RSTART(j), RPTR(j), o + RSTART(j), RLEN(j) / es, a->dtype, a->op);
        if (rc == MPI_SUCCESS && j + NSLOTS < kr)
            rc = MPI_Irecv(RPTR(j + NSLOTS), (int)RLEN(j + NSLOTS), MPI_BYTE, left, CCB_TAG,
                           a->comm, &rq[j % NSLOTS]);
    }
#undef RSTART
#undef RLEN
#undef RPTR
    if (rc == MPI_SUCCESS) rc = ccb_waitall(&sq);
    ccb_reqs_free(&sq);
    return rc;
}

static int in_place(const ccb_args *a, int r) {
    return (const char *)a->recvbuf == (const char *)a->sendbuf + (size_t)r * a->count * ccb_dtype_size(a->dtype);
}

static int redscat_mpi(const ccb_args *a) {
    if (a->count > INT_MAX) return CCB_ERR_ARG;
    MPI_Op op = ccb_mpi_op(a->dtype, a->op);
    if (op == MPI_OP_NULL) return CCB_ERR_UNSUPPORTED;
    int p, r;
    CCB_CHECK(ccb_comm_info(a->comm, &r, &p));
    MPI_Datatype t = ccb_mpi_datatype(a->dtype);
    size_t bytes = a->count * ccb_dtype_size(a->dtype);
    if (in_place(a, r)) {
        /* MPI's in-place form leaves the result at the start of the buffer */
        CCB_CHECK(MPI_Reduce_scatter_block(MPI_IN_PLACE, (void *)a->sendbuf, (int)a->count, t, op, a->comm));
        if (r) memmove(a->recvbuf, a->sendbuf, bytes);
    } else {
        CCB_CHECK(MPI_Reduce_scatter_block(a->sendbuf, a->recvbuf, (int)a->count, t, op, a->comm));
    }
    return ccb_finish_avg(a->recvbuf, a->count, a->dtype, a->op, p);
}

/* Ring: p − 1 steps; step s sends the partial sum of block r − s − 1 to the
 * right and receives that of block r − s − 2.  The first step sends input
 * straight from sendbuf; partial sums alternate between two scratch blocks;
 * the last step adds into recvbuf. */
static int redscat_ring(const ccb_args *a) {
    int p, r;
    CCB_CHECK(ccb_comm_info(a->comm, &r, &p));
    size_t es = ccb_dtype_size(a->dtype), n = a->count, bytes = n * es;
    const char *in = a->sendbuf;
    char *tmp = a->scratch;
    if (p == 1) return ccb_reduce_one_rank(a);
    int right = (r + 1) % p, left = (r - 1 + p) % p;
    for (int s = 0; s < p - 1; s++) {
        int sb = ccb_mod(r - s - 1, p), rb = ccb_mod(r - s - 2, p), last = s == p - 2;
        const char *src = s == 0 ? in + (size_t)sb * bytes : tmp + (size_t)((s - 1) % 2) * bytes;
        char *acc = last ? (char *)a->recvbuf : tmp + (size_t)(s % 2) * bytes;
        CCB_CHECK(ccb_ring_reduce_step(src, n, right, in + (size_t)rb * bytes, acc, n, left,
                                       last ? tmp + (size_t)(s % 2) * bytes : acc, bytes, last, a));
    }
    return ccb_finish_avg(a->recvbuf, n, a->dtype, a->op, p);
}

static size_t ring_scratch(size_t count, size_t elsize, int p) {
    (void)p;
    return 2 * count * elsize;
}

/* Recursive halving: lg q exchanges of half the remaining vector with
 * partner v ^ mask (ccb_fold_* for non-powers of two: virtual rank v owns the
 * blocks of its real ranks, contiguous).  Partial sums live in scratch
 * (acc: p blocks; then incoming data: p blocks); the last step writes this
 * rank's block straight into recvbuf. */
static int redscat_recursive_halving(const ccb_args *a) {
    int p, r;
    CCB_CHECK(ccb_comm_info(a->comm, &r, &p));
    size_t es = ccb_dtype_size(a->dtype), n = a->count, bytes = n * es, all = (size_t)p * bytes;
    const char *in = a->sendbuf, *cur = in;
    char *out = a->recvbuf, *acc = a->scratch, *tmp = (char *)a->scratch + all;
    if (p == 1) return ccb_reduce_one_rank(a);
    int q = ccb_pof2_floor(p), rem = p - q, v = ccb_fold_vrank(r, p);
    if (r < 2 * rem && !(r & 1)) {
        CCB_CHECK(ccb_send(in, all, r + 1, CCB_TAG, a->comm));
        return ccb_recv(out, bytes, r + 1, CCB_TAG, a->comm);
    }
    if (r < 2 * rem) {
        CCB_CHECK(ccb_recv(tmp, all, r - 1, CCB_TAG, a->comm));
        CCB_CHECK(ccb_reduce3(tmp, in, acc, (size_t)p * n, a->dtype, a->op));
        cur = acc;
    }
#define OFF(vb) ((size_t)ccb_fold_first((vb), p) * bytes)
    int lo = 0, hi = q;
    for (int mask = q / 2; mask >= 1; mask >>= 1) {
        int pv = v ^ mask, peer = ccb_fold_real(pv, p), mid = lo + (hi - lo) / 2, up = v & mask;
        int klo = up ? mid : lo, khi = up ? hi : mid, slo = up ? lo : mid, shi = up ? mid : hi;
        size_t kb = OFF(khi) - OFF(klo);
        CCB_CHECK(ccb_sendrecv(cur + OFF(slo), OFF(shi) - OFF(slo), peer, tmp, kb, peer,
                               CCB_TAG, a->comm));
        const char *x = v < pv ? cur + OFF(klo) : tmp, *y = v < pv ? tmp : cur + OFF(klo);
        if (mask == 1) {
            /* the kept range is this virtual rank's own: block r (and r − 1
             * when folded); write block r where it belongs */
            size_t mine = (size_t)r * bytes - OFF(klo);
            CCB_CHECK(ccb_reduce3(x + mine, y + mine, out, n, a->dtype, a->op));
            if (mine) CCB_CHECK(ccb_reduce3(x, y, acc, n, a->dtype, a->op));
        } else {
            CCB_CHECK(ccb_reduce3(x, y, acc + OFF(klo), kb / es, a->dtype, a->op));
        }
        cur = acc;
        lo = klo;
        hi = khi;
    }
#undef OFF
    CCB_CHECK(ccb_finish_avg(out, n, a->dtype, a->op, p));
    if (r < 2 * rem) {  /* the odd rank of a pair: block r − 1 to its owner */
        CCB_CHECK(ccb_finish_avg(acc, n, a->dtype, a->op, p));
        CCB_CHECK(ccb_send(acc, bytes, r - 1, CCB_TAG, a->comm));
    }
    return MPI_SUCCESS;
}

/* Direct: block j of the input goes to rank j at once; rank r reduces the p
 * contributions to its block (its own first, so in-place works). */
static int redscat_direct(const ccb_args *a) {
    int p, r;
    CCB_CHECK(ccb_comm_info(a->comm, &r, &p));
    size_t es = ccb_dtype_size(a->dtype), n = a->count, bytes = n * es;
    const char *in = a->sendbuf;
    char *tmp = a->scratch;
    if (p == 1) return ccb_reduce_one_rank(a);
    ccb_reqs q;
    ccb_reqs_init(&q);
    int rc = MPI_SUCCESS;
    for (int k = 1; k < p && rc == MPI_SUCCESS; k++) {
        int src = (r - k + p) % p, dst = (r + k) % p;
        rc = ccb_irecv(&q, tmp + (size_t)(k - 1) * bytes, bytes, src, CCB_TAG, a->comm);
        if (rc == MPI_SUCCESS) rc = ccb_isend(&q, in + (size_t)dst * bytes, bytes, dst, CCB_TAG, a->comm);
    }
    if (rc == MPI_SUCCESS) rc = ccb_waitall(&q);
    ccb_reqs_free(&q);
    CCB_CHECK(rc);
    CCB_CHECK(ccb_reduce3(in + (size_t)r * bytes, tmp, a->recvbuf, n, a->dtype, a->op));
    for (int k = 2; k < p; k++)
        CCB_CHECK(ccb_reduce_local(tmp + (size_t)(k - 1) * bytes, a->recvbuf, n, a->dtype, a->op));
    return ccb_finish_avg(a->recvbuf, n, a->dtype, a->op, p);
}

static size_t all_blocks(size_t count, size_t elsize, int p) {
    return (size_t)p * count * elsize;
}

static size_t halving_scratch(size_t count, size_t elsize, int p) {
    return 2 * (size_t)p * count * elsize;
}

const ccb_algorithm ccb_reduce_scatter_algorithms[] = {
    {"mpi", redscat_mpi, NULL},
    {"ring", redscat_ring, ring_scratch},
    {"recursive_halving", redscat_recursive_halving, halving_scratch},
    {"direct", redscat_direct, all_blocks},
    {NULL, NULL, NULL},
};
