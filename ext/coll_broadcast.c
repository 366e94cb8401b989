/* broadcast: count elements from the root to every rank's recvbuf.
 * Out-of-place (nccl-tests' ncclBroadcast): the root sends from sendbuf and
 * also copies it to its own recvbuf, after its sends, so that the copy
 * delays nobody.  In-place: sendbuf == recvbuf. */
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
 * (clear the lowest set bit), then send to children, farthest first. */
int ccb_bcast_binomial_bytes(void *buf, size_t bytes, int root, MPI_Comm comm) {
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
    for (mask >>= 1; mask > 0; mask >>= 1)
        if (vr + mask < p) CCB_CHECK(ccb_send(buf, bytes, (r + mask) % p, CCB_TAG, comm));
    return MPI_SUCCESS;
}

static int bcast_binomial(const ccb_args *a) {
    int r;
    CCB_CHECK(MPI_Comm_rank(a->comm, &r));
    CCB_CHECK(ccb_bcast_binomial_bytes(buffer(a, r), a->count * ccb_dtype_size(a->dtype),
                                       a->root, a->comm));
    return root_copy(a, r);
}

/* Scatter + all-gather (van de Geijn): a binomial scatter of the p-block
 * partition (block v belongs to relative rank v; a subtree receives its
 * blocks in one message), then a ring all-gather.  The root works in its
 * recvbuf, so out-of-place it copies first. */
static int bcast_scatter_allgather(const ccb_args *a) {
    int p, r;
    CCB_CHECK(ccb_comm_info(a->comm, &r, &p));
    size_t es = ccb_dtype_size(a->dtype), n = a->count;
    char *buf = a->recvbuf;
    if (r == a->root) ccb_copy(buf, a->sendbuf, n * es);
    if (p == 1) return MPI_SUCCESS;
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
    for (mask >>= 1; mask > 0; mask >>= 1) {
        int c = vr + mask;
        if (c < p)
            CCB_CHECK(ccb_send(buf + OFF(c), OFF(END(c + mask)) - OFF(c), (r + mask) % p,
                               CCB_TAG, a->comm));
    }
#undef OFF
#undef END
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
    if (rc == MPI_SUCCESS) rc = ccb_waitall(&sq);
    rq.n = 0;  /* all waited for above */
    ccb_reqs_free(&rq);
    ccb_reqs_free(&sq);
    CCB_CHECK(rc);
    return root_copy(a, r);
}

const ccb_algorithm ccb_broadcast_algorithms[] = {
    {"mpi", bcast_mpi, NULL},
    {"binomial", bcast_binomial, NULL},
    {"scatter_allgather", bcast_scatter_allgather, NULL},
    {"chain", bcast_chain, NULL},
    {NULL, NULL, NULL},
};
