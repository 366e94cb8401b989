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
