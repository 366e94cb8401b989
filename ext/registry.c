/* The list of collectives (ccbench_kit/collectives/collectives.def); each
 * table lives in its coll_<name>.c. */
#include <string.h>
#include "ccb.h"

/* one table per line of collectives.def */
#define CCB_COLL(ID, name, nccl) extern const ccb_algorithm ccb_##name##_algorithms[];
#include "collectives.def"
#undef CCB_COLL

static const ccb_collective collectives[] = {
#define CCB_COLL(ID, name, nccl) {#name, ccb_##name##_algorithms},
#include "collectives.def"
#undef CCB_COLL
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
