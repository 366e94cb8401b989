/* The timed loop.  Runs with the GIL released (see _engine.pyx). */
#include "ccb.h"

int ccb_time_loop(ccb_coll_fn fn, const ccb_args *args, int nargs,
                  int warmup, int iters, int agg, int blocking,
                  double *lat_us, double *start_us) {
    if (nargs < 1 || agg < 1 || iters < 0 || warmup < 0) return CCB_ERR_ARG;
    MPI_Comm comm = args[0].comm;
    int k = 0;
    for (int i = 0; i < warmup; i++) {
        for (int j = 0; j < agg; j++) CCB_CHECK(fn(&args[k++ % nargs]));
    }
    /* Everyone leaves warm-up together, so the first measured iteration does
     * not carry the skew of the slowest warm-up. */
    CCB_CHECK(MPI_Barrier(comm));
    for (int i = 0; i < iters; i++) {
        if (blocking) CCB_CHECK(MPI_Barrier(comm));
        double t0 = MPI_Wtime();
        for (int j = 0; j < agg; j++) CCB_CHECK(fn(&args[k++ % nargs]));
        double t1 = MPI_Wtime();
        lat_us[i] = (t1 - t0) * 1e6 / agg;
        if (start_us) start_us[i] = t0 * 1e6;
    }
    return MPI_SUCCESS;
}
