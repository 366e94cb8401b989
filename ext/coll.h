/* Building blocks the collectives share (p2p.c), and the algorithms one
 * collective borrows from another (a tree all-reduce is a reduce and a
 * broadcast).  Internal to the engine; ccb.h is the engine's interface.
 *
 * Conventions in every coll_*.c: p ranks, rank r, es bytes per element,
 * counts in elements, offsets and lengths passed to MPI in bytes through the
 * size_t helpers below (MPI's own counts are int).  Every algorithm works for
 * any p and any count: blocks come from ccb_block_start/ccb_block_len, and
 * non-powers of two fold the extra ranks into partners (ccb_fold_*).
 */
#ifndef CCB_COLL_H
#define CCB_COLL_H

#include <string.h>
#include "ccb.h"

static inline int ccb_mod(int a, int p) { return ((a % p) + p) % p; }

/* Largest power of two <= p (p >= 1). */
static inline int ccb_pof2_floor(int p) {
    int q = 1;
    while (q <= p / 2) q *= 2;
    return q;
}

static inline int ccb_comm_info(MPI_Comm comm, int *rank, int *size) {
    CCB_CHECK(MPI_Comm_rank(comm, rank));
    return MPI_Comm_size(comm, size);
}

static inline void ccb_copy(void *dst, const void *src, size_t bytes) {
    if (dst != src && bytes) memcpy(dst, src, bytes);
}

/* A reduction over one rank: its own input (count elements). */
static inline int ccb_reduce_one_rank(const ccb_args *a) {
    ccb_copy(a->recvbuf, a->sendbuf, a->count * ccb_dtype_size(a->dtype));
    return ccb_finish_avg(a->recvbuf, a->count, a->dtype, a->op, 1);
}

/* --- Folding p ranks onto the power of two q = ccb_pof2_floor(p) ---------
 * The first 2·(p − q) ranks pair up: the even one of each pair hands its data
 * to the odd one and sits out; the odd one plays virtual rank r / 2.  The
 * rest play r − (p − q).  Virtual rank v stands for the contiguous real ranks
 * [ccb_fold_first(v), ccb_fold_first(v + 1)), so a range of virtual ranks is a
 * contiguous range of real blocks: the power-of-two algorithms need no
 * reordering. */
static inline int ccb_fold_vrank(int r, int p) {
    int rem = p - ccb_pof2_floor(p);
    if (r < 2 * rem) return (r & 1) ? r / 2 : -1;
    return r - rem;
}
static inline int ccb_fold_real(int v, int p) {      /* the rank that plays v */
    int rem = p - ccb_pof2_floor(p);
    return v < rem ? 2 * v + 1 : v + rem;
}
static inline int ccb_fold_first(int v, int p) {     /* first real rank of v */
    int rem = p - ccb_pof2_floor(p);
    return v < rem ? 2 * v : v + rem;
}

/* --- Non-blocking point-to-point on size_t byte counts -------------------
 * A request set grows as needed (messages over 1 GiB take several requests);
 * the first CCB_REQS_INLINE live inside it, so typical calls never allocate. */
#define CCB_REQS_INLINE 32
typedef struct {
    MPI_Request *r;
    int n, cap;
    MPI_Request inl[CCB_REQS_INLINE];
} ccb_reqs;

void ccb_reqs_init(ccb_reqs *q);
int ccb_isend(ccb_reqs *q, const void *buf, size_t bytes, int dst, int tag, MPI_Comm comm);
int ccb_irecv(ccb_reqs *q, void *buf, size_t bytes, int src, int tag, MPI_Comm comm);
/* Wait for every request, then empty the set (it can be reused). */
int ccb_waitall(ccb_reqs *q);
/* Release the set's memory (after ccb_waitall, or on an error path). */
void ccb_reqs_free(ccb_reqs *q);

/* The same buffer is sent to dst and then replaced by what src sends. */
int ccb_sendrecv_replace(void *buf, size_t bytes, int dst, int src, int tag, MPI_Comm comm);

/* Pipelining granularity: a->segment_bytes, else CCB_SEGMENT_DEFAULT
 * (cache-sized: big enough that per-message costs vanish, small enough that
 * a received segment is still in L2 when it is reduced or forwarded). */
#define CCB_SEGMENT_DEFAULT ((size_t)256 << 10)
size_t ccb_segment_bytes(const ccb_args *a);
/* Segments of `bytes` at `seg` each; 1 for an empty message, so that both
 * sides always exchange at least one (empty) message. */
static inline size_t ccb_nseg(size_t bytes, size_t seg) {
    return bytes ? (bytes + seg - 1) / seg : 1;
}

/* Send and reduce at once: send `slen` elements of `src` to `dst` while
 * receiving `rlen` elements from `from`, and set out = in (op) received, or
 * received (op) in when `theirs_first` (so that two partners compute the
 * same bits).  Either side may be absent (dst or from MPI_PROC_NULL).
 * Messages go in segments (ccb_segment_bytes), and the received data is
 * staged in `stage` (stage_bytes): in two segment-sized slots reused in turn
 * when `reuse` is set and the message is longer, so that the reduction
 * reads it from cache; else at its natural offset (out may then be `stage`
 * itself).  src may be out (recursive doubling in place): a segment is only
 * overwritten once it has been sent.  Both sides must cut a message the
 * same way, so a rank sends to a rank that reduces with ccb_reduce_exchange
 * or ccb_send_segments. */
int ccb_reduce_exchange(const void *src, size_t slen, int dst,
                        const void *in, void *out, size_t rlen, int from, int theirs_first,
                        void *stage, size_t stage_bytes, int reuse, const ccb_args *a);
/* The sending side alone: n elements of buf to dst, in segments. */
int ccb_send_segments(const void *buf, size_t n, int dst, const ccb_args *a);

/* --- Pieces one collective borrows from another ---------------------------- */

/* Binomial broadcast of `bytes` from `root` (coll_broadcast.c). */
int ccb_bcast_binomial_bytes(void *buf, size_t bytes, int root, MPI_Comm comm);

/* Binomial-tree reduce of a's count elements to `root` (coll_reduce.c):
 * sendbuf is this rank's contribution, the result lands in recvbuf at the
 * root; other ranks use their recvbuf for partial sums and scratch (count
 * elements) for incoming data.  avg is left as a sum (the caller divides). */
int ccb_reduce_binomial_raw(const ccb_args *a, int root);

/* Ring all-gather of the p-block partition of n elements in `buf`
 * (ccb_block_start), where rank (v + shift) mod p owns block v and has it in
 * place already (coll_all_gather.c). */
int ccb_allgather_ring_part(char *buf, size_t n, size_t es, int shift, MPI_Comm comm);

/* all_gather algorithms that hypercube runs too (coll_all_gather.c). */
int ccb_allgather_mpi(const ccb_args *a);
int ccb_allgather_recursive_doubling(const ccb_args *a);

/* Gather/scatter trees (coll_gather.c): post the send or receive of the
 * blocks of relative ranks [first, first + cnt), contiguous at `buf` (or,
 * at the root, each at its real place), as two messages cut where real
 * ranks wrap. */
int ccb_rooted_pieces(ccb_reqs *q, int send, char *buf, int at_root, size_t bytes, int first,
                      int cnt, int peer, int root, int p, MPI_Comm comm);

/* sendrecv/permute (coll_sendrecv.c): send to dst, receive from src. */
int ccb_shift_mpi(const ccb_args *a, int dst, int src);

/* Scratch sizes every algorithm file uses. */
size_t ccb_scratch_count(size_t count, size_t elsize, int p);     /* count */
size_t ccb_scratch_block(size_t count, size_t elsize, int p);     /* ⌈count/p⌉ */

#endif
