/* A PMPI probe for tests: LD_PRELOAD it into the ranks to see the calls the
 * engine makes, and to delay one rank at a known call.
 *
 *   CCB_PROBE_COUNTS=1000,250   element counts of MPI_Allreduce calls to log
 *   CCB_PROBE_LOG=/path/log     each rank writes /path/log.<world rank> at MPI_Finalize
 *   CCB_PROBE_DELAY=R:K:US      rank R sleeps US microseconds right after its
 *                               K-th logged call returns (K counts from 0; -1 = every call)
 *
 * Log lines: "A <count> <sendbuf> <recvbuf> <comm>" for a logged MPI_Allreduce,
 * "B <comm>" for every MPI_Barrier after the first logged call.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_LINES 200000

static int ready, counts[16], ncounts, delay_rank = -1, delay_call = -2, delay_us;
static long logged;
static char *lines[MAX_LINES];
static int nlines;

static void setup(void) {
    if (ready) return;
    ready = 1;
    const char *c = getenv("CCB_PROBE_COUNTS");
    while (c && *c && ncounts < 16) {
        counts[ncounts++] = atoi(c);
        c = strchr(c, ',');
        if (c) c++;
    }
    const char *d = getenv("CCB_PROBE_DELAY");
    if (d) sscanf(d, "%d:%d:%d", &delay_rank, &delay_call, &delay_us);
}

static void add(const char *text) {
    if (nlines < MAX_LINES) lines[nlines++] = strdup(text);
}

static int probed(int count) {
    for (int i = 0; i < ncounts; i++) if (counts[i] == count) return 1;
    return 0;
}

int MPI_Allreduce(const void *s, void *r, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
    setup();
    int rc = PMPI_Allreduce(s, r, count, t, op, comm);
    if (probed(count)) {
        char text[160];
        snprintf(text, sizeof text, "A %d %p %p %p", count, s, r, (void *)comm);
        add(text);
        int me;
        PMPI_Comm_rank(MPI_COMM_WORLD, &me);
        if (me == delay_rank && (delay_call == -1 || delay_call == logged)) usleep(delay_us);
        logged++;
    }
    return rc;
}

int MPI_Barrier(MPI_Comm comm) {
    setup();
    if (logged) {
        char text[64];
        snprintf(text, sizeof text, "B %p", (void *)comm);
        add(text);
    }
    return PMPI_Barrier(comm);
}

int MPI_Finalize(void) {
    const char *path = getenv("CCB_PROBE_LOG");
    if (path) {
        int me;
        PMPI_Comm_rank(MPI_COMM_WORLD, &me);
        char name[4096];
        snprintf(name, sizeof name, "%s.%d", path, me);
        FILE *f = fopen(name, "w");
        if (f) {
            for (int i = 0; i < nlines; i++) fprintf(f, "%s\n", lines[i]);
            fclose(f);
        }
    }
    return PMPI_Finalize();
}
