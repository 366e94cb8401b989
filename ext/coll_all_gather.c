/* all_gather: count elements from each rank, recvbuf holds p * count.
 * In-place means sendbuf == recvbuf + rank * count (nccl-tests' layout). */
#include <limits.h>
#include <string.h>
#include "ccb.h"

static int allgather_mpi(const ccb_args *a) {
    if (a->count > INT_MAX) return CCB_ERR_ARG;
    int r; MPI_Comm_rank(a->comm, &r);
    size_t bytes = a->count * ccb_dtype_size(a->dtype);
    const void *s = a->sendbuf == (char *)a->recvbuf + (size_t)r * bytes ? MPI_IN_PLACE : a->sendbuf;
    MPI_Datatype t = ccb_mpi_datatype(a->dtype);
    return MPI_Allgather(s, (int)a->count, t, a->recvbuf, (int)a->count, t, a->comm);
}

/* Ring: p - 1 steps; step s forwards block (r - s) to the right and takes
 * block (r - s - 1) from the left, straight into its final place. */
static int allgather_ring(const ccb_args *a) {
    int p, r;
    MPI_Comm_size(a->comm, &p);
    MPI_Comm_rank(a->comm, &r);
    size_t bytes = a->count * ccb_dtype_size(a->dtype);
    char *out = a->recvbuf;
    if (a->sendbuf != out + (size_t)r * bytes) memcpy(out + (size_t)r * bytes, a->sendbuf, bytes);
    int right = (r + 1) % p, left = (r - 1 + p) % p;
    for (int s = 0; s < p - 1; s++) {
        int sb = ((r - s) % p + p) % p, rb = ((r - s - 1) % p + p) % p;
        CCB_CHECK(ccb_sendrecv(out + (size_t)sb * bytes, bytes, right,
                               out + (size_t)rb * bytes, bytes, left, CCB_TAG, a->comm));
    }
    return MPI_SUCCESS;
}

const ccb_algorithm ccb_all_gather_algorithms[] = {
    {"mpi", allgather_mpi, NULL},
    {"ring", allgather_ring, NULL},
    {NULL, NULL, NULL},
};
