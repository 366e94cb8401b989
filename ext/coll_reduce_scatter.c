/* reduce_scatter: sendbuf holds p blocks of count elements; rank r ends with
 * block r reduced over all ranks.  In-place (nccl-tests' layout): recvbuf is
 * block r of sendbuf. */
#include <limits.h>
#include "coll.h"

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
        CCB_CHECK(ccb_reduce_exchange(src, n, right, in + (size_t)rb * bytes, acc, n, left, 0,
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
 * (acc: p blocks; then staging for incoming data); the last step writes
 * this rank's block straight into recvbuf (a folded rank copies it out). */
static int redscat_recursive_halving(const ccb_args *a) {
    int p, r;
    CCB_CHECK(ccb_comm_info(a->comm, &r, &p));
    size_t es = ccb_dtype_size(a->dtype), n = a->count, bytes = n * es, all = (size_t)p * bytes;
    const char *in = a->sendbuf, *cur = in;
    char *out = a->recvbuf, *acc = a->scratch, *tmp = (char *)a->scratch + all;
    if (p == 1) return ccb_reduce_one_rank(a);
    int q = ccb_pof2_floor(p), rem = p - q, v = ccb_fold_vrank(r, p);
    int folded = r < 2 * rem;
    if (folded && !(r & 1)) {
        CCB_CHECK(ccb_send_segments(in, (size_t)p * n, r + 1, a));
        return ccb_recv(out, bytes, r + 1, CCB_TAG, a->comm);
    }
    if (folded) {
        CCB_CHECK(ccb_reduce_exchange(NULL, 0, MPI_PROC_NULL, in, acc, (size_t)p * n, r - 1, 1,
                                      tmp, all, 1, a));
        cur = acc;
    }
#define OFF(vb) ((size_t)ccb_fold_first((vb), p) * bytes)
    int lo = 0, hi = q;
    for (int mask = q / 2; mask >= 1; mask >>= 1) {
        int pv = v ^ mask, peer = ccb_fold_real(pv, p), mid = lo + (hi - lo) / 2, up = v & mask;
        int klo = up ? mid : lo, khi = up ? hi : mid, slo = up ? lo : mid, shi = up ? mid : hi;
        /* the last step keeps this virtual rank's own blocks: block r goes
         * straight to recvbuf, unless block r − 1 (folded) comes with it */
        char *dst = mask == 1 && !folded ? out : acc + OFF(klo);
        CCB_CHECK(ccb_reduce_exchange(cur + OFF(slo), (OFF(shi) - OFF(slo)) / es, peer,
                                      cur + OFF(klo), dst, (OFF(khi) - OFF(klo)) / es, peer,
                                      v > pv, tmp, all, 1, a));
        cur = acc;
        lo = klo;
        hi = khi;
    }
    if (folded) memcpy(out, acc + (size_t)r * bytes, bytes);
#undef OFF
    CCB_CHECK(ccb_finish_avg(out, n, a->dtype, a->op, p));
    if (folded) {  /* the odd rank of a pair: block r − 1 to its owner */
        char *theirs = acc + (size_t)(r - 1) * bytes;
        CCB_CHECK(ccb_finish_avg(theirs, n, a->dtype, a->op, p));
        CCB_CHECK(ccb_send(theirs, bytes, r - 1, CCB_TAG, a->comm));
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
