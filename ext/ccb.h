/* ccbench_kit engine: the C side of the MPI backend.
 *
 * One collective algorithm is one function with the signature ccb_coll_fn,
 * registered by name in its collective's table (coll_<name>.c).  The timed
 * loop (ccb_loop.c) calls it and records per-iteration durations; the
 * Cython layer (_engine.pyx) turns error codes into exceptions in one place.
 */
#ifndef CCB_H
#define CCB_H

#include <stddef.h>
#include <stdint.h>
#include <mpi.h>

typedef enum {
    CCB_UINT8 = 0, CCB_INT8, CCB_UINT16, CCB_INT16, CCB_FLOAT16, CCB_BFLOAT16,
    CCB_UINT32, CCB_INT32, CCB_FLOAT32, CCB_INT64, CCB_UINT64, CCB_FLOAT64,
    CCB_FLOAT8E4M3, CCB_FLOAT8E5M2,
    CCB_NDTYPES
} ccb_dtype;

typedef enum { CCB_SUM = 0, CCB_PROD, CCB_MIN, CCB_MAX, CCB_AVG, CCB_NOPS } ccb_op;

/* Error codes beyond MPI's own (which are passed through unchanged). */
enum {
    CCB_OK = 0,
    CCB_ERR_BASE = 100000,
    CCB_ERR_NOMEM,        /* scratch allocation failed */
    CCB_ERR_ARG,          /* an argument the algorithm cannot take */
    CCB_ERR_UNSUPPORTED,  /* dtype/op combination this path cannot do */
};

/* Everything one call of a collective needs.  Counts are in elements and
 * follow the MPI call's convention for the collective (all_reduce: the
 * buffer; all_gather: each rank's contribution; ...). */
typedef struct ccb_args {
    const void *sendbuf;
    void *recvbuf;
    size_t count;
    ccb_dtype dtype;
    ccb_op op;
    int root;
    MPI_Comm comm;
    void *scratch;            /* caller-owned scratch, scratch_bytes long */
    size_t scratch_bytes;
    size_t segment_bytes;     /* pipelining granularity; 0 = algorithm default */
    const int *sendcounts, *sdispls, *recvcounts, *rdispls;  /* v-collectives */
    const int *peers;         /* permute: peers[0] = send-to, peers[1] = recv-from */
} ccb_args;

typedef int (*ccb_coll_fn)(const ccb_args *a);

typedef struct {
    const char *name;
    ccb_coll_fn fn;
    /* scratch bytes the algorithm needs, given count, element size, ranks */
    size_t (*scratch)(size_t count, size_t elsize, int nranks);
} ccb_algorithm;

typedef struct {
    const char *name;
    const ccb_algorithm *algorithms;   /* terminated by {NULL} */
} ccb_collective;

/* registry.c */
const ccb_collective *ccb_find_collective(const char *name);
const ccb_algorithm *ccb_find_algorithm(const char *coll, const char *alg);
int ccb_collective_count(void);
const ccb_collective *ccb_collective_at(int i);

/* types.c */
size_t ccb_dtype_size(ccb_dtype t);
MPI_Datatype ccb_mpi_datatype(ccb_dtype t);
/* MPI op for (dtype, op); user-defined for fp16/bf16/fp8 and for avg's sum.
 * Returns MPI_OP_NULL where the pair is invalid (e.g. bitwise ops on floats). */
MPI_Op ccb_mpi_op(ccb_dtype t, ccb_op op);
int ccb_types_init(void);
void ccb_types_finalize(void);
const char *ccb_mpi_build_id(void);

/* reduce.c: inout[i] = inout[i] (op) in[i]; avg reduces as sum. */
int ccb_reduce_local(const void *in, void *inout, size_t n, ccb_dtype t, ccb_op op);
/* a = b (op) c, elementwise; out may alias b. */
int ccb_reduce3(const void *b, const void *c, void *out, size_t n, ccb_dtype t, ccb_op op);
/* Finish avg: divide by nranks in place (no-op for other ops). */
int ccb_finish_avg(void *buf, size_t n, ccb_dtype t, ccb_op op, int nranks);

/* loop.c: the timed loop.  args[i % nargs] is used for iteration i so that
 * --unique-buff can cycle buffers.  lat_us[iters] receives each measured
 * iteration's duration divided by agg; start_us[iters] its local start. */
/* Progress for the launcher's watchdog, which reads it from shared memory
 * while the loop runs: calls[0] counts calls entered, calls[1] calls left. */
typedef struct {
    volatile int64_t *calls;
} ccb_watch;

/* blocking: nccl-tests' -z.  NONE (0) times iterations back to back;
 * CALL_BARRIER (1) puts a barrier after every operation, inside the timed
 * span; CALL_WAIT (2) waits for every operation, no barrier (an MPI call is
 * already complete when it returns: as 0 here); ITER_BARRIER (3) puts a
 * barrier after every iteration, outside its span. */
enum { CCB_BLOCK_NONE = 0, CCB_BLOCK_CALL_BARRIER = 1, CCB_BLOCK_CALL_WAIT = 2,
       CCB_BLOCK_ITER_BARRIER = 3 };

int ccb_time_loop(ccb_coll_fn fn, const ccb_args *args, int nargs,
                  int warmup, int iters, int agg, int blocking,
                  double *lat_us, double *start_us, const ccb_watch *watch);

/* Split [0, count) into p nearly equal blocks; block i starts at
 * ccb_block_start(count, p, i). The first count % p blocks get one more. */
static inline size_t ccb_block_start(size_t count, int p, int i) {
    size_t q = count / (size_t)p, r = count % (size_t)p;
    return (size_t)i * q + ((size_t)i < r ? (size_t)i : r);
}
static inline size_t ccb_block_len(size_t count, int p, int i) {
    return ccb_block_start(count, p, i + 1) - ccb_block_start(count, p, i);
}

/* p2p.c: MPI's int counts, lifted to size_t by chunking big messages. */
int ccb_sendrecv(const void *sbuf, size_t sbytes, int dst,
                 void *rbuf, size_t rbytes, int src, int tag, MPI_Comm comm);
int ccb_send(const void *buf, size_t bytes, int dst, int tag, MPI_Comm comm);
int ccb_recv(void *buf, size_t bytes, int src, int tag, MPI_Comm comm);

#define CCB_TAG 0x4343  /* tag for the kit's own algorithms */
#define CCB_CHECK(call) do { int rc_ = (call); if (rc_ != MPI_SUCCESS) return rc_; } while (0)

#endif
