/* broadcast: count elements from the root to every rank's recvbuf.
 * Out-of-place (nccl-tests' ncclBroadcast): the root sends from sendbuf and
 * also copies it to its own recvbuf, while its sends are in flight (the
 * mpi algorithm: after MPI_Bcast), so that the copy delays nobody.
 * In-place: sendbuf == recvbuf. */
#include <limits.h>
#include "coll.h"

static int root_copy(const ccb_args *a, int r) {
    if (r == a->root) ccb_copy(a->recvbuf, a->sendbuf, a->count * ccb_dtype_size(a->dtype));
    return MPI_SUCCESS;
}

/* The buffer this rank broadcasts from or into. */
static void *buffer(const ccb_args *a, int r) {
    return r == a->root ? (void *)a->sendbuf : a->recvbuf;
}

static int bcast_mpi(const ccb_args *a) {
    if (a->count > INT_MAX) return CCB_ERR_ARG;
    int r;
    CCB_CHECK(MPI_Comm_rank(a->comm, &r));
    CCB_CHECK(MPI_Bcast(buffer(a, r), (int)a->count, ccb_mpi_datatype(a->dtype), a->root, a->comm));
    return root_copy(a, r);
}

/* Binomial tree on ranks relative to the root: receive from the parent
 * (clear the lowest set bit), then send to the children, all at once.
 * `copy_to`, when given, receives a copy of the data while the children
 * take theirs (the out-of-place root: with single-copy transfers the
 * receivers do the copying, so the root's own copy costs no time). */
static int bcast_binomial_into(void *buf, size_t bytes, int root, MPI_Comm comm, void *copy_to) {
    int p, r;
    CCB_CHECK(ccb_comm_info(comm, &r, &p));
    int vr = ccb_mod(r - root, p), mask = 1;
    while (mask < p) {
        if (vr & mask) {
            CCB_CHECK(ccb_recv(buf, bytes, ccb_mod(r - mask, p), CCB_TAG, comm));
            break;
        }
        mask <<= 1;
    }
    ccb_reqs q;
    ccb_reqs_init(&q);
    int rc = MPI_SUCCESS;
    for (mask >>= 1; mask > 0 && rc == MPI_SUCCESS; mask >>= 1)
        if (vr + mask < p) rc = ccb_isend(&q, buf, bytes, (r + mask) % p, CCB_TAG, comm);
    if (rc == MPI_SUCCESS && copy_to) ccb_copy(copy_to, buf, bytes);
    if (rc == MPI_SUCCESS) rc = ccb_waitall(&q);
    ccb_reqs_free(&q);
    return rc;
}

int ccb_bcast_binomial_bytes(void *buf, size_t bytes, int root, MPI_Comm comm) {
    return bcast_binomial_into(buf, bytes, root, comm, NULL);
}

static int bcast_binomial(const ccb_args *a) {
    int r;
    CCB_CHECK(MPI_Comm_rank(a->comm, &r));
    return bcast_binomial_into(buffer(a, r), a->count * ccb_dtype_size(a->dtype), a->root,
                               a->comm, r == a->root ? a->recvbuf : NULL);
}

/* Scatter + all-gather (van de Geijn): a binomial scatter of the p-block
 * partition (block v belongs to relative rank v; a subtree receives its
 * blocks in one message), then a ring all-gather in recvbuf.  The root
 * scatters from sendbuf and copies it to recvbuf meanwhile. */
static int bcast_scatter_allgather(const ccb_args *a) {
    int p, r;
    CCB_CHECK(ccb_comm_info(a->comm, &r, &p));
    size_t es = ccb_dtype_size(a->dtype), n = a->count;
    char *buf = a->recvbuf;
    const char *from = r == a->root ? a->sendbuf : buf;
    if (p == 1) return root_copy(a, r);
    int vr = ccb_mod(r - a->root, p), mask = 1;
#define OFF(v) (ccb_block_start(n, p, (v)) * es)
#define END(v) ((v) < p ? (v) : p)
    while (mask < p) {
        if (vr & mask) {
            CCB_CHECK(ccb_recv(buf + OFF(vr), OFF(END(vr + mask)) - OFF(vr), ccb_mod(r - mask, p),
                               CCB_TAG, a->comm));
            break;
        }
        mask <<= 1;
    }
    ccb_reqs q;
    ccb_reqs_init(&q);
    int rc = MPI_SUCCESS;
    for (mask >>= 1; mask > 0 && rc == MPI_SUCCESS; mask >>= 1) {
        int c = vr + mask;
        if (c < p)
            rc = ccb_isend(&q, from + OFF(c), OFF(END(c + mask)) - OFF(c), (r + mask) % p,
                           CCB_TAG, a->comm);
    }
#undef OFF
#undef END
    if (rc == MPI_SUCCESS) rc = root_copy(a, r);
    if (rc == MPI_SUCCESS) rc = ccb_waitall(&q);
    ccb_reqs_free(&q);
    CCB_CHECK(rc);
    return ccb_allgather_ring_part(buf, n, es, a->root, a->comm);
}

/* Pipelined chain: relative rank v receives segment k from v − 1 and
 * forwards it to v + 1 as soon as it is in.  Every receive is posted up
 * front, straight into its final place. */
static int bcast_chain(const ccb_args *a) {
    int p, r;
    CCB_CHECK(ccb_comm_info(a->comm, &r, &p));
    size_t es = ccb_dtype_size(a->dtype), n = a->count, seg = ccb_segment_bytes(a);
    size_t k = ccb_nseg(n * es, seg);
    int vr = ccb_mod(r - a->root, p), prev = ccb_mod(r - 1, p), next = (r + 1) % p;
    char *buf = buffer(a, r);
    ccb_reqs rq, sq;
    ccb_reqs_init(&rq);
    ccb_reqs_init(&sq);
    int rc = MPI_SUCCESS;
#define SEG(j) (buf + ccb_block_start(n, (int)k, (int)(j)) * es), (ccb_block_len(n, (int)k, (int)(j)) * es)
    if (vr > 0)
        for (size_t j = 0; j < k && rc == MPI_SUCCESS; j++)
            rc = ccb_irecv(&rq, SEG(j), prev, CCB_TAG, a->comm);
    for (size_t j = 0; j < k && rc == MPI_SUCCESS; j++) {
        if (vr > 0) rc = MPI_Wait(&rq.r[j], MPI_STATUS_IGNORE);
        if (rc == MPI_SUCCESS && vr < p - 1) rc = ccb_isend(&sq, SEG(j), next, CCB_TAG, a->comm);
    }
#undef SEG
    if (rc == MPI_SUCCESS) rc = root_copy(a, r);  /* while the next rank takes the data */
    if (rc == MPI_SUCCESS) rc = ccb_waitall(&sq);
    rq.n = 0;  /* all waited for above */
    ccb_reqs_free(&rq);
    ccb_reqs_free(&sq);
    return rc;
}

const ccb_algorithm ccb_broadcast_algorithms[] = {
    {"mpi", bcast_mpi, NULL},
    {"binomial", bcast_binomial, NULL},
    {"scatter_allgather", bcast_scatter_allgather, NULL},
    {"chain", bcast_chain, NULL},
    {NULL, NULL, NULL},
};
