/* The timed loop.  Runs with the GIL released (see _engine.pyx). */
#include "ccb.h"

static inline int call(ccb_coll_fn fn, const ccb_args *a, const ccb_watch *w, int64_t k) {
    if (w && w->calls) w->calls[0] = k + 1;
    int rc = fn(a);
    if (w && w->calls) w->calls[1] = k + 1;
    return rc;
}

int ccb_time_loop(ccb_coll_fn fn, const ccb_args *args, int nargs,
                  int warmup, int iters, int agg, int blocking,
                  double *lat_us, double *start_us, const ccb_watch *watch) {
    if (nargs < 1 || agg < 1 || iters < 0 || warmup < 0) return CCB_ERR_ARG;
    if (blocking < CCB_BLOCK_NONE || blocking > CCB_BLOCK_ITER_BARRIER) return CCB_ERR_ARG;
    MPI_Comm comm = args[0].comm;
    int64_t k = 0;
    for (int i = 0; i < warmup; i++) {
        for (int j = 0; j < agg; j++, k++) CCB_CHECK(call(fn, &args[k % nargs], watch, k));
    }
    /* Everyone leaves warm-up together, so the first measured iteration does
     * not carry the skew of the slowest warm-up. */
    CCB_CHECK(MPI_Barrier(comm));
    for (int i = 0; i < iters; i++) {
        double t0 = MPI_Wtime();
        for (int j = 0; j < agg; j++, k++) {
            CCB_CHECK(call(fn, &args[k % nargs], watch, k));
            /* nccl-tests -z 1: a barrier after every operation, timed.  -z 2
             * waits for each operation without a barrier: an MPI call has
             * completed locally when it returns, so there is nothing to add. */
            if (blocking == CCB_BLOCK_CALL_BARRIER) CCB_CHECK(MPI_Barrier(comm));
        }
        double t1 = MPI_Wtime();
        lat_us[i] = (t1 - t0) * 1e6 / agg;
        if (start_us) start_us[i] = t0 * 1e6;
        /* nccl-tests -z 3: a barrier after every iteration, outside its span. */
        if (blocking == CCB_BLOCK_ITER_BARRIER) CCB_CHECK(MPI_Barrier(comm));
    }
    return MPI_SUCCESS;
}
