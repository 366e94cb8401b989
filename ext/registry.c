/* The list of collectives; each table lives in its coll_<name>.c. */
#include <string.h>
#include "ccb.h"

extern const ccb_algorithm ccb_all_reduce_algorithms[];
extern const ccb_algorithm ccb_all_gather_algorithms[];
extern const ccb_algorithm ccb_reduce_scatter_algorithms[];
extern const ccb_algorithm ccb_alltoall_algorithms[];
extern const ccb_algorithm ccb_alltoallv_algorithms[];
extern const ccb_algorithm ccb_sendrecv_algorithms[];
extern const ccb_algorithm ccb_permute_algorithms[];
extern const ccb_algorithm ccb_broadcast_algorithms[];
extern const ccb_algorithm ccb_reduce_algorithms[];
extern const ccb_algorithm ccb_gather_algorithms[];
extern const ccb_algorithm ccb_scatter_algorithms[];
extern const ccb_algorithm ccb_hypercube_algorithms[];

static const ccb_collective collectives[] = {
    {"all_reduce", ccb_all_reduce_algorithms},
    {"all_gather", ccb_all_gather_algorithms},
    {"reduce_scatter", ccb_reduce_scatter_algorithms},
    {"alltoall", ccb_alltoall_algorithms},
    {"alltoallv", ccb_alltoallv_algorithms},
    {"sendrecv", ccb_sendrecv_algorithms},
    {"permute", ccb_permute_algorithms},
    {"broadcast", ccb_broadcast_algorithms},
    {"reduce", ccb_reduce_algorithms},
    {"gather", ccb_gather_algorithms},
    {"scatter", ccb_scatter_algorithms},
    {"hypercube", ccb_hypercube_algorithms},
};

#define NCOLL ((int)(sizeof collectives / sizeof collectives[0]))

int ccb_collective_count(void) { return NCOLL; }

const ccb_collective *ccb_collective_at(int i) {
    return (i >= 0 && i < NCOLL) ? &collectives[i] : NULL;
}

const ccb_collective *ccb_find_collective(const char *name) {
    for (int i = 0; i < NCOLL; i++)
        if (strcmp(collectives[i].name, name) == 0) return &collectives[i];
    return NULL;
}

const ccb_algorithm *ccb_find_algorithm(const char *coll, const char *alg) {
    const ccb_collective *c = ccb_find_collective(coll);
    if (!c) return NULL;
    for (const ccb_algorithm *a = c->algorithms; a->name; a++)
        if (strcmp(a->name, alg) == 0) return a;
    return NULL;
}
