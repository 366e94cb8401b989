/* sendrecv: a ring shift, as nccl-tests' sendrecv_perf: every rank sends
 * count elements to rank r + 1 and receives as many from rank r − 1.
 * In-place (sendbuf == recvbuf) is MPI_Sendrecv_replace's job: MPI forbids
 * overlapping buffers in MPI_Sendrecv. */
#include <limits.h>
#include "coll.h"

int ccb_shift_mpi(const ccb_args *a, int dst, int src) {
    if (a->count > INT_MAX) return CCB_ERR_ARG;
    MPI_Datatype t = ccb_mpi_datatype(a->dtype);
    if (a->sendbuf == a->recvbuf)
        return MPI_Sendrecv_replace(a->recvbuf, (int)a->count, t, dst, CCB_TAG, src, CCB_TAG,
                                    a->comm, MPI_STATUS_IGNORE);
    return MPI_Sendrecv(a->sendbuf, (int)a->count, t, dst, CCB_TAG,
                        a->recvbuf, (int)a->count, t, src, CCB_TAG, a->comm, MPI_STATUS_IGNORE);
}

static int sendrecv_mpi(const ccb_args *a) {
    int p, r;
    CCB_CHECK(ccb_comm_info(a->comm, &r, &p));
    return ccb_shift_mpi(a, (r + 1) % p, (r - 1 + p) % p);
}

const ccb_algorithm ccb_sendrecv_algorithms[] = {
    {"mpi", sendrecv_mpi, NULL},
    {NULL, NULL, NULL},
};
