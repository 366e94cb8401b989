/* reduce: count elements per rank; the root's recvbuf ends with the
 * reduction.  In-place: sendbuf == recvbuf (on every rank, as nccl-tests). */
#include <limits.h>
#include "coll.h"

static int reduce_mpi(const ccb_args *a) {
    if (a->count > INT_MAX) return CCB_ERR_ARG;
    MPI_Op op = ccb_mpi_op(a->dtype, a->op);
    if (op == MPI_OP_NULL) return CCB_ERR_UNSUPPORTED;
    int p, r;
    CCB_CHECK(ccb_comm_info(a->comm, &r, &p));
    const void *s = a->sendbuf == a->recvbuf && r == a->root ? MPI_IN_PLACE : a->sendbuf;
    CCB_CHECK(MPI_Reduce(s, a->recvbuf, (int)a->count, ccb_mpi_datatype(a->dtype), op, a->root, a->comm));
    return r == a->root ? ccb_finish_avg(a->recvbuf, a->count, a->dtype, a->op, p) : MPI_SUCCESS;
}

/* Binomial tree on ranks relative to the root: take each child's partial
 * sum (children by increasing distance) as it streams in and combine it with
 * this rank's, then pass the result to the parent.  A leaf sends its input
 * as it is; inner ranks accumulate in recvbuf (unused otherwise off the
 * root). */
int ccb_reduce_binomial_raw(const ccb_args *a, int root) {
    int p, r;
    CCB_CHECK(ccb_comm_info(a->comm, &r, &p));
    int vr = ccb_mod(r - root, p);
    const void *cur = a->sendbuf;
    for (int mask = 1; mask < p; mask <<= 1) {
        if (vr & mask) return ccb_send_segments(cur, a->count, ccb_mod(r - mask, p), a);
        if (vr + mask < p) {
            CCB_CHECK(ccb_reduce_exchange(NULL, 0, MPI_PROC_NULL, cur, a->recvbuf, a->count,
                                          (r + mask) % p, 0, a->scratch, a->scratch_bytes, 1, a));
            cur = a->recvbuf;
        }
    }
    ccb_copy(a->recvbuf, cur, a->count * ccb_dtype_size(a->dtype));  /* p == 1 */
    return MPI_SUCCESS;
}

static int reduce_binomial(const ccb_args *a) {
    int p, r;
    CCB_CHECK(ccb_comm_info(a->comm, &r, &p));
    CCB_CHECK(ccb_reduce_binomial_raw(a, a->root));
    return r == a->root ? ccb_finish_avg(a->recvbuf, a->count, a->dtype, a->op, p) : MPI_SUCCESS;
}

const ccb_algorithm ccb_reduce_algorithms[] = {
    {"mpi", reduce_mpi, NULL},
    {"binomial", reduce_binomial, ccb_scratch_count},
    {NULL, NULL, NULL},
};
