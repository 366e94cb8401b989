/* all_gather: count elements from each rank; recvbuf holds p * count, block
 * r from rank r.  In-place (nccl-tests' layout): sendbuf is block r of
 * recvbuf.  Every algorithm first puts this rank's block in place (a copy
 * only out-of-place), then moves the other blocks straight into place. */
#include <limits.h>
#include "coll.h"

int ccb_allgather_mpi(const ccb_args *a) {
    if (a->count > INT_MAX) return CCB_ERR_ARG;
    int r;
    CCB_CHECK(MPI_Comm_rank(a->comm, &r));
    size_t bytes = a->count * ccb_dtype_size(a->dtype);
    const void *s = a->sendbuf == (char *)a->recvbuf + (size_t)r * bytes ? MPI_IN_PLACE : a->sendbuf;
    MPI_Datatype t = ccb_mpi_datatype(a->dtype);
    return MPI_Allgather(s, (int)a->count, t, a->recvbuf, (int)a->count, t, a->comm);
}

static size_t own_block_in_place(const ccb_args *a, int r) {
    size_t bytes = a->count * ccb_dtype_size(a->dtype);
    ccb_copy((char *)a->recvbuf + (size_t)r * bytes, a->sendbuf, bytes);
    return bytes;
}

/* An algorithm's first exchange, when it sends just this rank's block: the
 * block goes to `dst` straight from sendbuf, `rbytes` arrive at `rptr`
 * from `src`, and the block is copied into place meanwhile. */
static int first_exchange(const ccb_args *a, int r, int dst, char *rptr, size_t rbytes, int src) {
    ccb_reqs q;
    ccb_reqs_init(&q);
    int rc = ccb_irecv(&q, rptr, rbytes, src, CCB_TAG, a->comm);
    if (rc == MPI_SUCCESS)
        rc = ccb_isend(&q, a->sendbuf, a->count * ccb_dtype_size(a->dtype), dst, CCB_TAG, a->comm);
    if (rc == MPI_SUCCESS) own_block_in_place(a, r);
    if (rc == MPI_SUCCESS) rc = ccb_waitall(&q);
    ccb_reqs_free(&q);
    return rc;
}

/* Steps first..p-2 of the ring on the p-block partition of n elements. */
static int ring_steps(char *buf, size_t n, size_t es, int shift, int first, MPI_Comm comm) {
    int p, r;
    CCB_CHECK(ccb_comm_info(comm, &r, &p));
    int v = ccb_mod(r - shift, p), right = (r + 1) % p, left = (r - 1 + p) % p;
    for (int s = first; s < p - 1; s++) {
        int sb = ccb_mod(v - s, p), rb = ccb_mod(v - s - 1, p);
        CCB_CHECK(ccb_sendrecv(buf + ccb_block_start(n, p, sb) * es, ccb_block_len(n, p, sb) * es, right,
                               buf + ccb_block_start(n, p, rb) * es, ccb_block_len(n, p, rb) * es, left,
                               CCB_TAG, comm));
    }
    return MPI_SUCCESS;
}

int ccb_allgather_ring_part(char *buf, size_t n, size_t es, int shift, MPI_Comm comm) {
    return ring_steps(buf, n, es, shift, 0, comm);
}

/* Ring: p − 1 steps; step s forwards block r − s to the right and takes
 * block r − s − 1 from the left (the first from sendbuf). */
static int allgather_ring(const ccb_args *a) {
    int p, r;
    CCB_CHECK(ccb_comm_info(a->comm, &r, &p));
    size_t bytes = a->count * ccb_dtype_size(a->dtype);
    if (p == 1) {
        own_block_in_place(a, r);
        return MPI_SUCCESS;
    }
    int left = (r - 1 + p) % p;
    CCB_CHECK(first_exchange(a, r, (r + 1) % p, (char *)a->recvbuf + (size_t)left * bytes, bytes, left));
    return ring_steps(a->recvbuf, (size_t)p * a->count, ccb_dtype_size(a->dtype), 0, 1, a->comm);
}

/* Recursive doubling (nccl-tests' hypercube): lg q exchanges; with partner
 * v ^ mask, swap the mask blocks each holds, which sit next to each other.
 * Non-powers of two fold (ccb_fold_*): the even rank of a pair gives its
 * block to the odd one and gets the whole result back at the end. */
int ccb_allgather_recursive_doubling(const ccb_args *a) {
    int p, r;
    CCB_CHECK(ccb_comm_info(a->comm, &r, &p));
    size_t bytes = a->count * ccb_dtype_size(a->dtype), all = (size_t)p * bytes;
    char *buf = a->recvbuf;
    int q = ccb_pof2_floor(p), rem = p - q, v = ccb_fold_vrank(r, p), mask = 1;
#define OFF(vb) ((size_t)ccb_fold_first((vb), p) * bytes)
    if (r >= 2 * rem && q > 1) {  /* the first exchange is this rank's block alone */
        int pv = v ^ 1;
        CCB_CHECK(first_exchange(a, r, ccb_fold_real(pv, p), buf + OFF(pv), OFF(pv + 1) - OFF(pv),
                                 ccb_fold_real(pv, p)));
        mask = 2;
    } else {
        own_block_in_place(a, r);
    }
    if (r < 2 * rem && !(r & 1)) {
        CCB_CHECK(ccb_send(buf + (size_t)r * bytes, bytes, r + 1, CCB_TAG, a->comm));
        return ccb_recv(buf, all, r + 1, CCB_TAG, a->comm);
    }
    if (r < 2 * rem) CCB_CHECK(ccb_recv(buf + (size_t)(r - 1) * bytes, bytes, r - 1, CCB_TAG, a->comm));
    for (; mask < q; mask <<= 1) {
        int pv = v ^ mask, peer = ccb_fold_real(pv, p);
        int mine = v & ~(mask - 1), theirs = pv & ~(mask - 1);
        CCB_CHECK(ccb_sendrecv(buf + OFF(mine), OFF(mine + mask) - OFF(mine), peer,
                               buf + OFF(theirs), OFF(theirs + mask) - OFF(theirs), peer,
                               CCB_TAG, a->comm));
    }
#undef OFF
    if (r < 2 * rem) CCB_CHECK(ccb_send(buf, all, r - 1, CCB_TAG, a->comm));
    return MPI_SUCCESS;
}

/* The blocks [first, first + cnt) taken circularly: at most two contiguous
 * pieces, cut where the block index wraps from p − 1 to 0.  Sender and
 * receiver name the same blocks, so they cut at the same place. */
static int circular(ccb_reqs *q, int send, char *buf, size_t bytes, int first, int cnt, int p,
                    int peer, MPI_Comm comm) {
    int n1 = first + cnt <= p ? cnt : p - first, n2 = cnt - n1;
    char *p1 = buf + (size_t)first * bytes;
    CCB_CHECK(send ? ccb_isend(q, p1, (size_t)n1 * bytes, peer, CCB_TAG, comm)
                   : ccb_irecv(q, p1, (size_t)n1 * bytes, peer, CCB_TAG, comm));
    if (n2 > 0)
        CCB_CHECK(send ? ccb_isend(q, buf, (size_t)n2 * bytes, peer, CCB_TAG, comm)
                       : ccb_irecv(q, buf, (size_t)n2 * bytes, peer, CCB_TAG, comm));
    return MPI_SUCCESS;
}

/* Bruck: ⌈lg p⌉ steps for any p.  At distance d, send the blocks r..r+c−1
 * (circularly) to rank r − d and receive r+d..r+d+c−1 from rank r + d, with
 * c = min(d, p − d).  Blocks go to their final places, so the usual final
 * rotation of Bruck's algorithm is not needed. */
static int allgather_bruck(const ccb_args *a) {
    int p, r;
    CCB_CHECK(ccb_comm_info(a->comm, &r, &p));
    size_t bytes = a->count * ccb_dtype_size(a->dtype);
    if (p == 1) {
        own_block_in_place(a, r);
        return MPI_SUCCESS;
    }
    /* distance 1: this rank's block alone, straight from sendbuf */
    CCB_CHECK(first_exchange(a, r, (r - 1 + p) % p, (char *)a->recvbuf + (size_t)((r + 1) % p) * bytes,
                             bytes, (r + 1) % p));
    ccb_reqs q;
    ccb_reqs_init(&q);
    int rc = MPI_SUCCESS;
    for (int d = 2; d < p && rc == MPI_SUCCESS; d <<= 1) {
        int c = d < p - d ? d : p - d;
        rc = circular(&q, 0, a->recvbuf, bytes, (r + d) % p, c, p, (r + d) % p, a->comm);
        if (rc == MPI_SUCCESS)
            rc = circular(&q, 1, a->recvbuf, bytes, r, c, p, (r - d + p) % p, a->comm);
        if (rc == MPI_SUCCESS) rc = ccb_waitall(&q);
    }
    ccb_reqs_free(&q);
    return rc;
}

/* Direct: this rank's block goes to every other rank at once. */
static int allgather_direct(const ccb_args *a) {
    int p, r;
    CCB_CHECK(ccb_comm_info(a->comm, &r, &p));
    size_t bytes = a->count * ccb_dtype_size(a->dtype);
    char *out = a->recvbuf;
    ccb_reqs q;
    ccb_reqs_init(&q);
    int rc = MPI_SUCCESS;
    for (int k = 1; k < p && rc == MPI_SUCCESS; k++) {
        int src = (r - k + p) % p, dst = (r + k) % p;
        rc = ccb_irecv(&q, out + (size_t)src * bytes, bytes, src, CCB_TAG, a->comm);
        if (rc == MPI_SUCCESS) rc = ccb_isend(&q, a->sendbuf, bytes, dst, CCB_TAG, a->comm);
    }
    /* the local copy overlaps the transfers */
    if (rc == MPI_SUCCESS) own_block_in_place(a, r);
    if (rc == MPI_SUCCESS) rc = ccb_waitall(&q);
    ccb_reqs_free(&q);
    return rc;
}

const ccb_algorithm ccb_all_gather_algorithms[] = {
    {"mpi", ccb_allgather_mpi, NULL},
    {"ring", allgather_ring, NULL},
    {"recursive_doubling", ccb_allgather_recursive_doubling, NULL},
    {"bruck", allgather_bruck, NULL},
    {"direct", allgather_direct, NULL},
    {NULL, NULL, NULL},
};
