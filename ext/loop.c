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
    MPI_Comm comm = args[0].comm;
    int64_t k = 0;
    for (int i = 0; i < warmup; i++) {
        for (int j = 0; j < agg; j++, k++) CCB_CHECK(call(fn, &args[k % nargs], watch, k));
    }
    /* Everyone leaves warm-up together, so the first measured iteration does
     * not carry the skew of the slowest warm-up. */
    CCB_CHECK(MPI_Barrier(comm));
    for (int i = 0; i < iters; i++) {
        if (blocking) CCB_CHECK(MPI_Barrier(comm));
        double t0 = MPI_Wtime();
        for (int j = 0; j < agg; j++, k++) CCB_CHECK(call(fn, &args[k % nargs], watch, k));
        double t1 = MPI_Wtime();
        lat_us[i] = (t1 - t0) * 1e6 / agg;
        if (start_us) start_us[i] = t0 * 1e6;
    }
    return MPI_SUCCESS;
}
