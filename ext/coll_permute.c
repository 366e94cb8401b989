/* permute (nccom-test): every rank sends count elements to its target and
 * receives as many from its source, as a list of [source, target] pairs
 * says.  peers[0] is this rank's target, peers[1] its source; −1 for none
 * (MPI_PROC_NULL).  Without peers, the ring shift of sendrecv. */
#include "coll.h"

static int permute_mpi(const ccb_args *a) {
    int p, r;
    CCB_CHECK(ccb_comm_info(a->comm, &r, &p));
    int dst = (r + 1) % p, src = (r - 1 + p) % p;
    if (a->peers) {
        dst = a->peers[0] < 0 ? MPI_PROC_NULL : a->peers[0];
        src = a->peers[1] < 0 ? MPI_PROC_NULL : a->peers[1];
    }
    if ((dst != MPI_PROC_NULL && dst >= p) || (src != MPI_PROC_NULL && src >= p)) return CCB_ERR_ARG;
    return ccb_shift_mpi(a, dst, src);
}

const ccb_algorithm ccb_permute_algorithms[] = {
    {"mpi", permute_mpi, NULL},
    {NULL, NULL, NULL},
};
