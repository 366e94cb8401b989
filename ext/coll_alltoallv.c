/* alltoallv: rank r sends sendcounts[j] elements from sdispls[j] to rank j
 * and receives recvcounts[j] elements at rdispls[j] from rank j (elements,
 * as MPI_Alltoallv).  Out-of-place only: in place, MPI's form needs the
 * count matrix to be symmetric, which metadata files rarely are. */
#include "coll.h"

static int check(const ccb_args *a) {
    if (!a->sendcounts || !a->sdispls || !a->recvcounts || !a->rdispls) return CCB_ERR_ARG;
    return a->sendbuf == a->recvbuf ? CCB_ERR_ARG : MPI_SUCCESS;
}

static int alltoallv_mpi(const ccb_args *a) {
    CCB_CHECK(check(a));
    MPI_Datatype t = ccb_mpi_datatype(a->dtype);
    return MPI_Alltoallv(a->sendbuf, a->sendcounts, a->sdispls, t,
                         a->recvbuf, a->recvcounts, a->rdispls, t, a->comm);
}

#define SPTR(j) ((const char *)a->sendbuf + (size_t)a->sdispls[j] * es)
#define SLEN(j) ((size_t)a->sendcounts[j] * es)
#define RPTR(j) ((char *)a->recvbuf + (size_t)a->rdispls[j] * es)
#define RLEN(j) ((size_t)a->recvcounts[j] * es)

/* Pairwise exchange: p − 1 steps, step s sends to r + s, receives from r − s. */
static int alltoallv_pairwise(const ccb_args *a) {
    CCB_CHECK(check(a));
    int p, r;
    CCB_CHECK(ccb_comm_info(a->comm, &r, &p));
    size_t es = ccb_dtype_size(a->dtype);
    ccb_copy(RPTR(r), SPTR(r), SLEN(r) < RLEN(r) ? SLEN(r) : RLEN(r));
    for (int s = 1; s < p; s++) {
        int dst = (r + s) % p, src = (r - s + p) % p;
        CCB_CHECK(ccb_sendrecv(SPTR(dst), SLEN(dst), dst, RPTR(src), RLEN(src), src, CCB_TAG, a->comm));
    }
    return MPI_SUCCESS;
}

/* Direct: all sends and receives at once. */
static int alltoallv_direct(const ccb_args *a) {
    CCB_CHECK(check(a));
    int p, r;
    CCB_CHECK(ccb_comm_info(a->comm, &r, &p));
    size_t es = ccb_dtype_size(a->dtype);
    ccb_reqs q;
    ccb_reqs_init(&q);
    int rc = MPI_SUCCESS;
    for (int k = 1; k < p && rc == MPI_SUCCESS; k++) {
        int src = (r - k + p) % p, dst = (r + k) % p;
        rc = ccb_irecv(&q, RPTR(src), RLEN(src), src, CCB_TAG, a->comm);
        if (rc == MPI_SUCCESS) rc = ccb_isend(&q, SPTR(dst), SLEN(dst), dst, CCB_TAG, a->comm);
    }
    if (rc == MPI_SUCCESS) ccb_copy(RPTR(r), SPTR(r), SLEN(r) < RLEN(r) ? SLEN(r) : RLEN(r));
    if (rc == MPI_SUCCESS) rc = ccb_waitall(&q);
    ccb_reqs_free(&q);
    return rc;
}

const ccb_algorithm ccb_alltoallv_algorithms[] = {
    {"mpi", alltoallv_mpi, NULL},
    {"pairwise", alltoallv_pairwise, NULL},
    {"direct", alltoallv_direct, NULL},
    {NULL, NULL, NULL},
};
