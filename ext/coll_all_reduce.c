/* all_reduce: count elements per rank, every rank ends with the reduction. */
#include <limits.h>
#include <string.h>
#include "ccb.h"

static int allreduce_mpi(const ccb_args *a) {
    if (a->count > INT_MAX) return CCB_ERR_ARG;
    MPI_Op op = ccb_mpi_op(a->dtype, a->op);
    if (op == MPI_OP_NULL) return CCB_ERR_UNSUPPORTED;
    const void *s = a->sendbuf == a->recvbuf ? MPI_IN_PLACE : a->sendbuf;
    CCB_CHECK(MPI_Allreduce(s, a->recvbuf, (int)a->count, ccb_mpi_datatype(a->dtype), op, a->comm));
    if (a->op == CCB_AVG) {
        int p; MPI_Comm_size(a->comm, &p);
        return ccb_finish_avg(a->recvbuf, a->count, a->dtype, a->op, p);
    }
    return MPI_SUCCESS;
}

/* Ring: reduce-scatter then all-gather, p - 1 steps each, on p nearly equal
 * blocks (any count, any p).  Reduce-scatter step s receives the partial sum
 * of block (r - s - 1) from the left and adds this rank's own input straight
 * into recvbuf, so out-of-place needs no initial copy. */
static int allreduce_ring(const ccb_args *a) {
    int p, r;
    MPI_Comm_size(a->comm, &p);
    MPI_Comm_rank(a->comm, &r);
    size_t es = ccb_dtype_size(a->dtype), n = a->count;
    const char *in = a->sendbuf;
    char *out = a->recvbuf, *tmp = a->scratch;
    if (p == 1) {
        if (in != out) memcpy(out, in, n * es);
        return ccb_finish_avg(out, n, a->dtype, a->op, p);
    }
    int right = (r + 1) % p, left = (r - 1 + p) % p;
    for (int s = 0; s < p - 1; s++) {
        int sb = ((r - s) % p + p) % p, rb = ((r - s - 1) % p + p) % p;
        const char *src = (s == 0 ? in : out) + ccb_block_start(n, p, sb) * es;
        CCB_CHECK(ccb_sendrecv(src, ccb_block_len(n, p, sb) * es, right,
                               tmp, ccb_block_len(n, p, rb) * es, left, CCB_TAG, a->comm));
        size_t off = ccb_block_start(n, p, rb) * es;
        CCB_CHECK(ccb_reduce3(in + off, tmp, out + off, ccb_block_len(n, p, rb), a->dtype, a->op));
    }
    int own = (r + 1) % p;
    CCB_CHECK(ccb_finish_avg(out + ccb_block_start(n, p, own) * es, ccb_block_len(n, p, own),
                             a->dtype, a->op, p));
    for (int s = 0; s < p - 1; s++) {
        int sb = ((r + 1 - s) % p + p) % p, rb = ((r - s) % p + p) % p;
        CCB_CHECK(ccb_sendrecv(out + ccb_block_start(n, p, sb) * es, ccb_block_len(n, p, sb) * es, right,
                               out + ccb_block_start(n, p, rb) * es, ccb_block_len(n, p, rb) * es, left,
                               CCB_TAG, a->comm));
    }
    return MPI_SUCCESS;
}

static size_t ring_scratch(size_t count, size_t elsize, int p) {
    return (count / (size_t)p + 1) * elsize;
}

const ccb_algorithm ccb_all_reduce_algorithms[] = {
    {"mpi", allreduce_mpi, NULL},
    {"ring", allreduce_ring, ring_scratch},
    {NULL, NULL, NULL},
};
