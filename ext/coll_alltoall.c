/* alltoall: sendbuf and recvbuf hold p blocks of count elements; block j of
 * rank i's sendbuf ends as block i of rank j's recvbuf.  In-place: sendbuf
 * == recvbuf (MPI_IN_PLACE's meaning; nccl-tests does not check it). */
#include <limits.h>
#include "coll.h"

static int alltoall_mpi(const ccb_args *a) {
    if (a->count > INT_MAX) return CCB_ERR_ARG;
    MPI_Datatype t = ccb_mpi_datatype(a->dtype);
    const void *s = a->sendbuf == a->recvbuf ? MPI_IN_PLACE : a->sendbuf;
    return MPI_Alltoall(s, (int)a->count, t, a->recvbuf, (int)a->count, t, a->comm);
}

/* Pairwise exchange: p − 1 steps, step s sends to r + s and receives from
 * r − s.  In-place, block r − s would be overwritten before it is sent, so
 * partners pair up symmetrically instead (step s: partner s − r) and each
 * exchange goes through one scratch block. */
static int alltoall_pairwise(const ccb_args *a) {
    int p, r;
    CCB_CHECK(ccb_comm_info(a->comm, &r, &p));
    size_t bytes = a->count * ccb_dtype_size(a->dtype);
    const char *in = a->sendbuf;
    char *out = a->recvbuf;
    if (in == out) {
        for (int s = 0; s < p; s++) {
            int peer = ccb_mod(s - r, p);
            if (peer == r) continue;
            memcpy(a->scratch, out + (size_t)peer * bytes, bytes);
            CCB_CHECK(ccb_sendrecv(a->scratch, bytes, peer, out + (size_t)peer * bytes, bytes, peer,
                                   CCB_TAG, a->comm));
        }
        return MPI_SUCCESS;
    }
    ccb_copy(out + (size_t)r * bytes, in + (size_t)r * bytes, bytes);
    for (int s = 1; s < p; s++) {
        int dst = (r + s) % p, src = (r - s + p) % p;
        CCB_CHECK(ccb_sendrecv(in + (size_t)dst * bytes, bytes, dst, out + (size_t)src * bytes, bytes,
                               src, CCB_TAG, a->comm));
    }
    return MPI_SUCCESS;
}

static size_t one_block(size_t count, size_t elsize, int p) {
    (void)p;
    return count * elsize;
}

/* Bruck: ⌈lg p⌉ steps.  Rotate so that work block i is for rank r + i; at
 * step k send every work block whose index has bit k set to rank r + k and
 * take the same blocks from r − k; then work block i holds rank r − i's
 * data for this rank.  The rotations and the packing of the sent blocks are
 * the copies the algorithm trades for its few messages. */
static int alltoall_bruck(const ccb_args *a) {
    int p, r;
    CCB_CHECK(ccb_comm_info(a->comm, &r, &p));
    size_t bytes = a->count * ccb_dtype_size(a->dtype), half = (size_t)(p + 1) / 2 * bytes;
    const char *in = a->sendbuf;
    char *out = a->recvbuf, *work = a->scratch, *spack = work + (size_t)p * bytes, *rpack = spack + half;
    for (int i = 0; i < p; i++)
        memcpy(work + (size_t)i * bytes, in + (size_t)((r + i) % p) * bytes, bytes);
    for (int k = 1; k < p; k <<= 1) {
        size_t m = 0;
        for (int i = k; i < p; i++)
            if (i & k) memcpy(spack + (m++) * bytes, work + (size_t)i * bytes, bytes);
        CCB_CHECK(ccb_sendrecv(spack, m * bytes, (r + k) % p, rpack, m * bytes, (r - k + p) % p,
                               CCB_TAG, a->comm));
        m = 0;
        for (int i = k; i < p; i++)
            if (i & k) memcpy(work + (size_t)i * bytes, rpack + (m++) * bytes, bytes);
    }
    for (int i = 0; i < p; i++)
        memcpy(out + (size_t)((r - i + p) % p) * bytes, work + (size_t)i * bytes, bytes);
    return MPI_SUCCESS;
}

static size_t bruck_scratch(size_t count, size_t elsize, int p) {
    return ((size_t)p + 2 * ((size_t)(p + 1) / 2)) * count * elsize;
}

/* Direct: all p − 1 sends and receives at once.  In-place, the outgoing data
 * is first copied to scratch, since incoming blocks overwrite it. */
static int alltoall_direct(const ccb_args *a) {
    int p, r;
    CCB_CHECK(ccb_comm_info(a->comm, &r, &p));
    size_t bytes = a->count * ccb_dtype_size(a->dtype);
    const char *in = a->sendbuf;
    char *out = a->recvbuf;
    if (in == out) {
        memcpy(a->scratch, in, (size_t)p * bytes);
        in = a->scratch;
    }
    ccb_reqs q;
    ccb_reqs_init(&q);
    int rc = MPI_SUCCESS;
    for (int k = 1; k < p && rc == MPI_SUCCESS; k++) {
        int src = (r - k + p) % p, dst = (r + k) % p;
        rc = ccb_irecv(&q, out + (size_t)src * bytes, bytes, src, CCB_TAG, a->comm);
        if (rc == MPI_SUCCESS) rc = ccb_isend(&q, in + (size_t)dst * bytes, bytes, dst, CCB_TAG, a->comm);
    }
    if (rc == MPI_SUCCESS) ccb_copy(out + (size_t)r * bytes, in + (size_t)r * bytes, bytes);
    if (rc == MPI_SUCCESS) rc = ccb_waitall(&q);
    ccb_reqs_free(&q);
    return rc;
}

static size_t all_blocks(size_t count, size_t elsize, int p) {
    return (size_t)p * count * elsize;
}

const ccb_algorithm ccb_alltoall_algorithms[] = {
    {"mpi", alltoall_mpi, NULL},
    {"pairwise", alltoall_pairwise, one_block},
    {"bruck", alltoall_bruck, bruck_scratch},
    {"direct", alltoall_direct, all_blocks},
    {NULL, NULL, NULL},
};
