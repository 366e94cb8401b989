/* scatter: the root's sendbuf holds p blocks of count elements; rank j's
 * recvbuf ends with block j.  In-place (nccl-tests' layout): recvbuf is
 * block r of sendbuf on every rank. */
#include <limits.h>
#include "coll.h"

static int in_place(const ccb_args *a, int r, size_t bytes) {
    return (const char *)a->recvbuf == (const char *)a->sendbuf + (size_t)r * bytes;
}

static int scatter_mpi(const ccb_args *a) {
    if (a->count > INT_MAX) return CCB_ERR_ARG;
    int r;
    CCB_CHECK(MPI_Comm_rank(a->comm, &r));
    size_t bytes = a->count * ccb_dtype_size(a->dtype);
    MPI_Datatype t = ccb_mpi_datatype(a->dtype);
    void *rb = r == a->root && in_place(a, r, bytes) ? MPI_IN_PLACE : a->recvbuf;
    return MPI_Scatter(a->sendbuf, (int)a->count, t, rb, (int)a->count, t, a->root, a->comm);
}

/* Linear: the root sends each rank its block, all at once. */
static int scatter_linear(const ccb_args *a) {
    int p, r;
    CCB_CHECK(ccb_comm_info(a->comm, &r, &p));
    size_t bytes = a->count * ccb_dtype_size(a->dtype);
    if (r != a->root) return ccb_recv(a->recvbuf, bytes, a->root, CCB_TAG, a->comm);
    ccb_reqs q;
    ccb_reqs_init(&q);
    int rc = MPI_SUCCESS;
    for (int j = 0; j < p && rc == MPI_SUCCESS; j++)
        if (j != r) rc = ccb_isend(&q, (const char *)a->sendbuf + (size_t)j * bytes, bytes, j, CCB_TAG, a->comm);
    if (rc == MPI_SUCCESS) ccb_copy(a->recvbuf, (const char *)a->sendbuf + (size_t)r * bytes, bytes);
    if (rc == MPI_SUCCESS) rc = ccb_waitall(&q);
    ccb_reqs_free(&q);
    return rc;
}

/* Binomial tree on ranks relative to the root, the gather's mirror: a rank
 * receives its subtree's blocks in one message and passes each child its
 * share.  Leaves receive straight into recvbuf; inner ranks stage in
 * scratch and copy their own block out of it. */
static int scatter_binomial(const ccb_args *a) {
    int p, r;
    CCB_CHECK(ccb_comm_info(a->comm, &r, &p));
    size_t bytes = a->count * ccb_dtype_size(a->dtype);
    int vr = ccb_mod(r - a->root, p), at_root = vr == 0, mask = 1, cnt = p;
    char *stage = at_root ? (char *)a->sendbuf : a->scratch;
    ccb_reqs q;
    ccb_reqs_init(&q);
    while (mask < p && !(vr & mask)) mask <<= 1;
    if (!at_root) {  /* this rank's subtree from its parent; a leaf's straight into recvbuf */
        cnt = vr + mask < p ? mask : p - vr;
        CCB_CHECK(ccb_rooted_pieces(&q, 0, cnt == 1 ? a->recvbuf : stage, 0, bytes, vr, cnt,
                                    ccb_mod(r - mask, p), a->root, p, a->comm));
        CCB_CHECK(ccb_waitall(&q));
        if (cnt == 1) return MPI_SUCCESS;
    }
    int rc = MPI_SUCCESS;
    for (mask >>= 1; mask > 0 && rc == MPI_SUCCESS; mask >>= 1) {
        int c = vr + mask;
        if (c < p)
            rc = ccb_rooted_pieces(&q, 1, at_root ? stage : stage + (size_t)(c - vr) * bytes, at_root,
                                   bytes, c, c + mask < p ? mask : p - c, (r + mask) % p, a->root,
                                   p, a->comm);
    }
    /* own block out of the staging area while the children take theirs */
    if (rc == MPI_SUCCESS) ccb_copy(a->recvbuf, at_root ? stage + (size_t)r * bytes : stage, bytes);
    if (rc == MPI_SUCCESS) rc = ccb_waitall(&q);
    ccb_reqs_free(&q);
    return rc;
}

static size_t all_blocks(size_t count, size_t elsize, int p) {
    return (size_t)p * count * elsize;
}

const ccb_algorithm ccb_scatter_algorithms[] = {
    {"mpi", scatter_mpi, NULL},
    {"linear", scatter_linear, NULL},
    {"binomial", scatter_binomial, all_blocks},
    {NULL, NULL, NULL},
};
