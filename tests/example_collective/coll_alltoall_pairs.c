/* alltoall_pairs (the worked example of a new collective; see
 * alltoall_pairs.py beside it): swap the buffer with partner rank ^ 1. */
#include <string.h>
#include "coll.h"

static int pairs_mpi(const ccb_args *a) {
    int p, r;
    CCB_CHECK(ccb_comm_info(a->comm, &r, &p));
    int partner = r ^ 1;
    if (partner >= p) {  /* the last rank of an odd count keeps its own */
        if (a->recvbuf != a->sendbuf)
            memcpy(a->recvbuf, a->sendbuf, a->count * ccb_dtype_size(a->dtype));
        return MPI_SUCCESS;
    }
    return ccb_shift_mpi(a, partner, partner);
}

const ccb_algorithm ccb_alltoall_pairs_algorithms[] = {
    {"mpi", pairs_mpi, NULL},
    {NULL, NULL, NULL},
};
