/* MPI_Allreduce (fp32 sum) timed as IMB times it, at the thread level named
 * on the command line: single (MPI_Init, as IMB, OSU and nccl-tests start
 * MPI), funneled, serialized or multiple (MPI_Init_thread).  No Python and
 * no kit: bench/thread_level.py runs it to show what the level alone costs.
 * Prints "size avg_us" per size, each rank's mean per call averaged over
 * ranks (IMB's t_avg). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    const char *names[] = {"single", "funneled", "serialized", "multiple"};
    const int levels[] = {MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED, MPI_THREAD_SERIALIZED,
                          MPI_THREAD_MULTIPLE};
    int want = -1, provided = 0;
    for (int i = 0; i < 4 && argc > 1; i++)
        if (!strcmp(argv[1], names[i])) want = i;
    if (want < 0) {
        fprintf(stderr, "usage: thread_level single|funneled|serialized|multiple [min max iters]\n");
        return 2;
    }
    if (want == 0) MPI_Init(&argc, &argv);
    else MPI_Init_thread(&argc, &argv, levels[want], &provided);
    size_t lo = argc > 2 ? strtoul(argv[2], NULL, 10) : 4096;
    size_t hi = argc > 3 ? strtoul(argv[3], NULL, 10) : 1 << 20;
    int iters = argc > 4 ? atoi(argv[4]) : 1000;
    int rank, p;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    float *s = malloc(hi), *r = malloc(hi);   /* once, at the largest size, as IMB */
    for (size_t i = 0; i < hi / sizeof(float); i++) {
        s[i] = 0.1f * (rank + 1) + (float)i;    /* IMB's BUF_VALUE */
        r[i] = 0;
    }
    for (size_t n = lo; n <= hi; n *= 2) {
        int count = (int)(n / sizeof(float));
        for (int i = 0; i < iters / 10 + 1; i++)      /* IMB's warm-up: a tenth */
            MPI_Allreduce(s, r, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        double t = 0;
        for (int i = 0; i < iters; i++) {   /* IMB_allreduce: the call alone, then a barrier */
            t -= MPI_Wtime();
            MPI_Allreduce(s, r, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            t += MPI_Wtime();
            MPI_Barrier(MPI_COMM_WORLD);
        }
        t = t / iters * 1e6;
        double sum = 0;
        MPI_Reduce(&t, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0) printf("%zu %.3f\n", n, sum / p);
    }
    free(s);
    free(r);
    MPI_Finalize();
    return 0;
}
