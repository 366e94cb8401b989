/* gather: count elements from each rank; the root's recvbuf holds p blocks,
 * block j from rank j.  In-place (nccl-tests' layout): sendbuf is block r of
 * recvbuf on every rank. */
#include <limits.h>
#include "coll.h"

static int in_place(const ccb_args *a, int r, size_t bytes) {
    return (const char *)a->sendbuf == (const char *)a->recvbuf + (size_t)r * bytes;
}

static int gather_mpi(const ccb_args *a) {
    if (a->count > INT_MAX) return CCB_ERR_ARG;
    int r;
    CCB_CHECK(MPI_Comm_rank(a->comm, &r));
    size_t bytes = a->count * ccb_dtype_size(a->dtype);
    MPI_Datatype t = ccb_mpi_datatype(a->dtype);
    const void *s = r == a->root && in_place(a, r, bytes) ? MPI_IN_PLACE : a->sendbuf;
    return MPI_Gather(s, (int)a->count, t, a->recvbuf, (int)a->count, t, a->root, a->comm);
}

/* Linear: the root posts a receive per rank, straight into place. */
static int gather_linear(const ccb_args *a) {
    int p, r;
    CCB_CHECK(ccb_comm_info(a->comm, &r, &p));
    size_t bytes = a->count * ccb_dtype_size(a->dtype);
    if (r != a->root) return ccb_send(a->sendbuf, bytes, a->root, CCB_TAG, a->comm);
    ccb_reqs q;
    ccb_reqs_init(&q);
    int rc = MPI_SUCCESS;
    for (int j = 0; j < p && rc == MPI_SUCCESS; j++)
        if (j != r) rc = ccb_irecv(&q, (char *)a->recvbuf + (size_t)j * bytes, bytes, j, CCB_TAG, a->comm);
    if (rc == MPI_SUCCESS) ccb_copy((char *)a->recvbuf + (size_t)r * bytes, a->sendbuf, bytes);
    if (rc == MPI_SUCCESS) rc = ccb_waitall(&q);
    ccb_reqs_free(&q);
    return rc;
}

/* Post the send (or receive) of the relative blocks [first, first + cnt),
 * held contiguously at `buf`, as two messages cut where the real rank wraps
 * (relative block p − root is real block 0).  A non-root side keeps them
 * contiguous in relative order; the root (`at_root`) puts each piece at
 * its real place.  Both sides cut at the same block, so the pieces match. */
int ccb_rooted_pieces(ccb_reqs *q, int send, char *buf, int at_root, size_t bytes, int first,
                      int cnt, int peer, int root, int p, MPI_Comm comm) {
    int wrap = p - root, n1 = first >= wrap ? 0 : (first + cnt <= wrap ? cnt : wrap - first);
    int n2 = cnt - n1;
    char *p1 = at_root ? buf + (size_t)((first + root) % p) * bytes : buf;
    char *p2 = at_root ? buf + (size_t)((first + n1 + root) % p) * bytes : buf + (size_t)n1 * bytes;
    if (n1)
        CCB_CHECK(send ? ccb_isend(q, p1, (size_t)n1 * bytes, peer, CCB_TAG, comm)
                       : ccb_irecv(q, p1, (size_t)n1 * bytes, peer, CCB_TAG, comm));
    if (n2)
        CCB_CHECK(send ? ccb_isend(q, p2, (size_t)n2 * bytes, peer, CCB_TAG, comm)
                       : ccb_irecv(q, p2, (size_t)n2 * bytes, peer, CCB_TAG, comm));
    return MPI_SUCCESS;
}

/* Binomial tree on ranks relative to the root: a rank collects its
 * subtree's blocks (relative ranks vr..vr+size−1) and sends them up in one
 * go (two pieces where real ranks wrap).  Inner non-root ranks stage the
 * subtree in scratch; leaves send their input directly; the root receives
 * straight into place. */
static int gather_binomial(const ccb_args *a) {
    int p, r;
    CCB_CHECK(ccb_comm_info(a->comm, &r, &p));
    size_t bytes = a->count * ccb_dtype_size(a->dtype);
    int vr = ccb_mod(r - a->root, p), at_root = vr == 0, have = 1, mask = 1;
    char *stage = at_root ? a->recvbuf : a->scratch, *own = (char *)a->sendbuf;
    ccb_reqs q;
    ccb_reqs_init(&q);
    int rc = MPI_SUCCESS;
    /* every child's subtree at once, whichever is ready first */
    for (; mask < p && !(vr & mask) && rc == MPI_SUCCESS; mask <<= 1) {
        int c = vr + mask;
        if (c >= p) continue;
        int cnt = c + mask < p ? mask : p - c;
        rc = ccb_rooted_pieces(&q, 0, at_root ? stage : stage + (size_t)(c - vr) * bytes, at_root,
                               bytes, c, cnt, (r + mask) % p, a->root, p, a->comm);
        have += cnt;
    }
    /* this rank's own block in place meanwhile: the root's at block r, an
     * inner rank's first in its staged subtree; a leaf sends its input */
    if (rc == MPI_SUCCESS && at_root) ccb_copy(stage + (size_t)r * bytes, own, bytes);
    else if (rc == MPI_SUCCESS && have > 1) memcpy(stage, own, bytes);
    if (rc == MPI_SUCCESS) rc = ccb_waitall(&q);
    if (rc == MPI_SUCCESS && !at_root)
        rc = ccb_rooted_pieces(&q, 1, have > 1 ? stage : own, 0, bytes, vr, have,
                               ccb_mod(r - mask, p), a->root, p, a->comm);
    if (rc == MPI_SUCCESS) rc = ccb_waitall(&q);
    ccb_reqs_free(&q);
    return rc;
}

static size_t all_blocks(size_t count, size_t elsize, int p) {
    return (size_t)p * count * elsize;
}

const ccb_algorithm ccb_gather_algorithms[] = {
    {"mpi", gather_mpi, NULL},
    {"linear", gather_linear, NULL},
    {"binomial", gather_binomial, all_blocks},
    {NULL, NULL, NULL},
};
