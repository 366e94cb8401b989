/* alltoall: sendbuf and recvbuf hold p blocks of count elements; block j of
 * rank i's sendbuf ends as block i of rank j's recvbuf.  In-place: sendbuf
 * == recvbuf (MPI_IN_PLACE's meaning; nccl-tests does not check it). */
#include <limits.h>
#include <stdlib.h>
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

/* Bruck: ⌈lg p⌉ steps.  Virtual block i is the data for rank r + i; at step
 * k every block whose index has bit k set goes to rank r + k, and the same
 * blocks come from rank r − k; in the end block i holds rank r − i's data
 * for this rank.  Blocks are tracked by pointer rather than rotated: a step
 * sends one block straight from where it lies and packs only several, and
 * a block that is final when it arrives alone lands in recvbuf directly.
 * What remains is the packing and one final copy per block, the copies
 * Bruck's algorithm trades for its few messages. */
static size_t bruck_steps_blocks(int p) {  /* blocks received over all steps */
    size_t m = 0;
    for (int k = 1; k < p; k <<= 1)
        for (int i = k; i < p; i++) m += (i & k) != 0;
    return m;
}

static int alltoall_bruck(const ccb_args *a) {
    int p, r;
    CCB_CHECK(ccb_comm_info(a->comm, &r, &p));
    size_t bytes = a->count * ccb_dtype_size(a->dtype);
    const char *in = a->sendbuf;
    char *out = a->recvbuf, *spack = a->scratch, *rnext = spack + (size_t)(p + 1) / 2 * bytes;
    if (in == out) {  /* in place: arriving blocks would overwrite unsent ones */
        char *copy = rnext + bruck_steps_blocks(p) * bytes;
        memcpy(copy, in, (size_t)p * bytes);
        in = copy;
    }
    const char **loc = malloc((size_t)p * sizeof *loc);
    int *sel = malloc((size_t)p * sizeof *sel);
    int rc = loc && sel ? MPI_SUCCESS : CCB_ERR_NOMEM;
    for (int i = 0; i < p && rc == MPI_SUCCESS; i++) loc[i] = in + (size_t)((r + i) % p) * bytes;
    for (int k = 1; k < p && rc == MPI_SUCCESS; k <<= 1) {
        int m = 0;
        for (int i = k; i < p; i++)
            if (i & k) sel[m++] = i;
        const char *sptr = loc[sel[0]];
        if (m > 1) {
            for (int j = 0; j < m; j++) memcpy(spack + (size_t)j * bytes, loc[sel[j]], bytes);
            sptr = spack;
        }
        /* a lone block with no higher bit set is final when it arrives */
        int direct = m == 1 && sel[0] < 2 * k;
        char *rptr = direct ? out + (size_t)ccb_mod(r - sel[0], p) * bytes : rnext;
        rc = ccb_sendrecv(sptr, (size_t)m * bytes, (r + k) % p, rptr, (size_t)m * bytes,
                          ccb_mod(r - k, p), CCB_TAG, a->comm);
        for (int j = 0; j < m; j++) loc[sel[j]] = rptr + (size_t)j * bytes;
        if (!direct) rnext += (size_t)m * bytes;
    }
    for (int i = 0; i < p && rc == MPI_SUCCESS; i++) {
        char *dst = out + (size_t)ccb_mod(r - i, p) * bytes;
        if (loc[i] != dst) memcpy(dst, loc[i], bytes);
    }
    free(loc);
    free(sel);
    return rc;
}

static size_t bruck_scratch(size_t count, size_t elsize, int p) {
    return ((size_t)(p + 1) / 2 + bruck_steps_blocks(p) + (size_t)p) * count * elsize;
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
