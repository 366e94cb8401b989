/* hypercube (nccl-tests' hypercube_perf): an all-gather done as lg p
 * exchanges with rank r ^ mask, each doubling the blocks held.  Same layout
 * as all_gather; `recursive_doubling` is nccl-tests' exchange pattern (and
 * folds non-powers of two, which nccl-tests skips); `mpi` is MPI_Allgather,
 * the library's way to the same result. */
#include "coll.h"

const ccb_algorithm ccb_hypercube_algorithms[] = {
    {"mpi", ccb_allgather_mpi, NULL},
    {"recursive_doubling", ccb_allgather_recursive_doubling, NULL},
    {NULL, NULL, NULL},
};
