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
 * sum (children by increasing distance), combine it with this rank's, and
 * pass the result to the parent.  A leaf sends its input as it is; inner
 * ranks accumulate in `out` (their recvbuf, unused otherwise). */
int ccb_reduce_binomial_raw(const void *in, void *out, void *tmp, size_t n,
                            ccb_dtype t, ccb_op op, int root, MPI_Comm comm) {
    int p, r;
    CCB_CHECK(ccb_comm_info(comm, &r, &p));
    size_t bytes = n * ccb_dtype_size(t);
    int vr = ccb_mod(r - root, p);
    const void *cur = in;
    for (int mask = 1; mask < p; mask <<= 1) {
        if (vr & mask)
            return ccb_send(cur, bytes, ccb_mod(r - mask, p), CCB_TAG, comm);
        if (vr + mask < p) {
            CCB_CHECK(ccb_recv(tmp, bytes, (r + mask) % p, CCB_TAG, comm));
            CCB_CHECK(ccb_reduce3(cur, tmp, out, n, t, op));
            cur = out;
        }
    }
    ccb_copy(out, cur, bytes);  /* p == 1 */
    return MPI_SUCCESS;
}

static int reduce_binomial(const ccb_args *a) {
    int p, r;
    CCB_CHECK(ccb_comm_info(a->comm, &r, &p));
    CCB_CHECK(ccb_reduce_binomial_raw(a->sendbuf, a->recvbuf, a->scratch, a->count, a->dtype,
                                      a->op, a->root, a->comm));
    return r == a->root ? ccb_finish_avg(a->recvbuf, a->count, a->dtype, a->op, p) : MPI_SUCCESS;
}

const ccb_algorithm ccb_reduce_algorithms[] = {
    {"mpi", reduce_mpi, NULL},
    {"binomial", reduce_binomial, ccb_scratch_count},
    {NULL, NULL, NULL},
};
