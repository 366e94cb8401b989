/* Point-to-point helpers on bytes with size_t lengths: MPI counts are int,
 * so messages over 1 GiB go in pieces.  Both sides cut a message at the same
 * places, so pieces match up whatever the other side's buffer looks like. */
#include <limits.h>
#include <stdlib.h>
#include "coll.h"

#define CHUNK ((size_t)1 << 30)

static inline size_t piece(size_t bytes, size_t off) {
    return bytes - off < CHUNK ? bytes - off : CHUNK;
}

int ccb_sendrecv(const void *sbuf, size_t sbytes, int dst,
                 void *rbuf, size_t rbytes, int src, int tag, MPI_Comm comm) {
    if (sbytes <= CHUNK && rbytes <= CHUNK)
        return MPI_Sendrecv(sbuf, (int)sbytes, MPI_BYTE, dst, tag,
                            rbuf, (int)rbytes, MPI_BYTE, src, tag, comm, MPI_STATUS_IGNORE);
    size_t off = 0, n = sbytes > rbytes ? sbytes : rbytes;
    while (off < n) {
        size_t sl = off < sbytes ? piece(sbytes, off) : 0;
        size_t rl = off < rbytes ? piece(rbytes, off) : 0;
        CCB_CHECK(MPI_Sendrecv((const char *)sbuf + (sl ? off : 0), (int)sl, MPI_BYTE, dst, tag,
                               (char *)rbuf + (rl ? off : 0), (int)rl, MPI_BYTE, src, tag,
                               comm, MPI_STATUS_IGNORE));
        off += CHUNK;
    }
    return MPI_SUCCESS;
}

int ccb_sendrecv_replace(void *buf, size_t bytes, int dst, int src, int tag, MPI_Comm comm) {
    size_t off = 0;
    do {
        size_t l = piece(bytes, off);
        CCB_CHECK(MPI_Sendrecv_replace((char *)buf + off, (int)l, MPI_BYTE, dst, tag, src, tag,
                                       comm, MPI_STATUS_IGNORE));
        off += l;
    } while (off < bytes);
    return MPI_SUCCESS;
}

int ccb_send(const void *buf, size_t bytes, int dst, int tag, MPI_Comm comm) {
    size_t off = 0;
    do {
        size_t l = piece(bytes, off);
        CCB_CHECK(MPI_Send((const char *)buf + off, (int)l, MPI_BYTE, dst, tag, comm));
        off += l;
    } while (off < bytes);
    return MPI_SUCCESS;
}

int ccb_recv(void *buf, size_t bytes, int src, int tag, MPI_Comm comm) {
    size_t off = 0;
    do {
        size_t l = piece(bytes, off);
        CCB_CHECK(MPI_Recv((char *)buf + off, (int)l, MPI_BYTE, src, tag, comm, MPI_STATUS_IGNORE));
        off += l;
    } while (off < bytes);
    return MPI_SUCCESS;
}

/* --- request sets --------------------------------------------------------- */

void ccb_reqs_init(ccb_reqs *q) {
    q->r = q->inl;
    q->n = 0;
    q->cap = CCB_REQS_INLINE;
}

void ccb_reqs_free(ccb_reqs *q) {
    if (q->r != q->inl) free(q->r);
    ccb_reqs_init(q);
}

static MPI_Request *slot(ccb_reqs *q) {
    if (q->n == q->cap) {
        int cap = 2 * q->cap;
        MPI_Request *r = malloc((size_t)cap * sizeof *r);
        if (!r) return NULL;
        memcpy(r, q->r, (size_t)q->n * sizeof *r);
        if (q->r != q->inl) free(q->r);
        q->r = r;
        q->cap = cap;
    }
    return &q->r[q->n++];
}

int ccb_isend(ccb_reqs *q, const void *buf, size_t bytes, int dst, int tag, MPI_Comm comm) {
    size_t off = 0;
    do {
        size_t l = piece(bytes, off);
        MPI_Request *r = slot(q);
        if (!r) return CCB_ERR_NOMEM;
        CCB_CHECK(MPI_Isend((const char *)buf + off, (int)l, MPI_BYTE, dst, tag, comm, r));
        off += l;
    } while (off < bytes);
    return MPI_SUCCESS;
}

int ccb_irecv(ccb_reqs *q, void *buf, size_t bytes, int src, int tag, MPI_Comm comm) {
    size_t off = 0;
    do {
        size_t l = piece(bytes, off);
        MPI_Request *r = slot(q);
        if (!r) return CCB_ERR_NOMEM;
        CCB_CHECK(MPI_Irecv((char *)buf + off, (int)l, MPI_BYTE, src, tag, comm, r));
        off += l;
    } while (off < bytes);
    return MPI_SUCCESS;
}

int ccb_waitall(ccb_reqs *q) {
    int rc = q->n ? MPI_Waitall(q->n, q->r, MPI_STATUSES_IGNORE) : MPI_SUCCESS;
    q->n = 0;
    return rc;
}

/* --- scratch sizes --------------------------------------------------------- */

size_t ccb_scratch_count(size_t count, size_t elsize, int p) {
    (void)p;
    return count * elsize;
}

size_t ccb_scratch_block(size_t count, size_t elsize, int p) {
    return (count / (size_t)p + 1) * elsize;
}

size_t ccb_segment_bytes(const ccb_args *a) {
    size_t seg = a->segment_bytes ? a->segment_bytes : CCB_SEGMENT_DEFAULT;
    size_t es = ccb_dtype_size(a->dtype);
    if (seg > ((size_t)1 << 30)) seg = (size_t)1 << 30;
    return seg < es ? es : seg;
}

/* --- send and reduce at once ------------------------------------------------ */

#define NSLOTS 2

int ccb_reduce_exchange(const void *src, size_t slen, int dst,
                        const void *in, void *out, size_t rlen, int from, int theirs_first,
                        void *stage, size_t stage_bytes, int reuse, const ccb_args *a) {
    size_t es = ccb_dtype_size(a->dtype), seg = ccb_segment_bytes(a);
    size_t ks = dst == MPI_PROC_NULL ? 0 : ccb_nseg(slen * es, seg);
    size_t kr = from == MPI_PROC_NULL ? 0 : ccb_nseg(rlen * es, seg);
    size_t stride = kr ? (rlen / kr + 1) * es : 0;
    int slots = reuse && kr > NSLOTS && NSLOTS * stride <= stage_bytes;
    const char *s = src, *x = in;
    char *o = out, *st = stage;
    /* src overlapping out: wait for a segment's send before overwriting it
     * (the same segment when the two coincide, else every send first) */
    int overlap = ks && kr && s < o + rlen * es && o < s + slen * es;
    int same = overlap && s == o && slen == rlen;
#define SSTART(j) (ccb_block_start(slen, (int)ks, (int)(j)) * es)
#define SLEN(j) (ccb_block_len(slen, (int)ks, (int)(j)) * es)
#define RSTART(j) (ccb_block_start(rlen, (int)kr, (int)(j)) * es)
#define RLEN(j) (ccb_block_len(rlen, (int)kr, (int)(j)) * es)
#define RPTR(j) (st + (slots ? ((j) % NSLOTS) * stride : RSTART(j)))
    MPI_Request rq[NSLOTS];
    ccb_reqs sq;
    ccb_reqs_init(&sq);
    int rc = MPI_SUCCESS;
    for (size_t j = 0; j < kr && j < NSLOTS && rc == MPI_SUCCESS; j++)
        rc = MPI_Irecv(RPTR(j), (int)RLEN(j), MPI_BYTE, from, CCB_TAG, a->comm, &rq[j]);
    for (size_t j = 0; j < ks && rc == MPI_SUCCESS; j++)
        rc = ccb_isend(&sq, s + SSTART(j), SLEN(j), dst, CCB_TAG, a->comm);
    if (rc == MPI_SUCCESS && overlap && !same) rc = ccb_waitall(&sq);
    for (size_t j = 0; j < kr && rc == MPI_SUCCESS; j++) {
        rc = MPI_Wait(&rq[j % NSLOTS], MPI_STATUS_IGNORE);
        if (rc == MPI_SUCCESS && same) rc = MPI_Wait(&sq.r[j], MPI_STATUS_IGNORE);
        if (rc == MPI_SUCCESS)
            rc = theirs_first ? ccb_reduce3(RPTR(j), x + RSTART(j), o + RSTART(j), RLEN(j) / es, a->dtype, a->op)
                              : ccb_reduce3(x + RSTART(j), RPTR(j), o + RSTART(j), RLEN(j) / es, a->dtype, a->op);
        if (rc == MPI_SUCCESS && j + NSLOTS < kr)
            rc = MPI_Irecv(RPTR(j + NSLOTS), (int)RLEN(j + NSLOTS), MPI_BYTE, from, CCB_TAG,
                           a->comm, &rq[j % NSLOTS]);
    }
#undef SSTART
#undef SLEN
#undef RSTART
#undef RLEN
#undef RPTR
    if (rc == MPI_SUCCESS) rc = ccb_waitall(&sq);  /* waited-for requests are MPI_REQUEST_NULL */
    ccb_reqs_free(&sq);
    return rc;
}

int ccb_send_segments(const void *buf, size_t n, int dst, const ccb_args *a) {
    return ccb_reduce_exchange(buf, n, dst, NULL, NULL, 0, MPI_PROC_NULL, 0, NULL, 0, 0, a);
}
