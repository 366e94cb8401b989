// The host side of the device-API kernels (devapi.cuh): the device
// communicator they take and their one argument, compiled with the same
// headers as the kernels so that the layouts agree.  It links to nothing:
// NCCL's functions come as pointers into the library the kit loaded, so the
// kernels and the collectives beside them use one libnccl.
#include <string.h>

#include "devapi.cuh"

typedef ncclResult_t (*DevCommCreate)(ncclComm_t, const ncclDevCommRequirements *, ncclDevComm *);
typedef ncclResult_t (*DevCommDestroy)(ncclComm_t, const ncclDevComm *);

extern "C" size_t ccbd_devcomm_bytes(void) { return sizeof(ncclDevComm); }

extern "C" size_t ccbd_args_bytes(void) { return sizeof(DArgs); }

// ncclDevCommCreate with `barriers` LSA barriers (one a block of the grid),
// into `out` (ccbd_devcomm_bytes); the team's facts the caller checks.
extern "C" int ccbd_devcomm_create(void *create, void *comm, int barriers, void *out,
                                   int *nranks, int *lsa_size) {
    ncclDevCommRequirements reqs;
    memset(&reqs, 0, sizeof reqs);  // NCCL 2.28 has no initializer macro: zero is "none"
    reqs.lsaBarrierCount = barriers;
    ncclDevComm *dc = (ncclDevComm *)out;
    ncclResult_t rc = ((DevCommCreate)create)((ncclComm_t)comm, &reqs, dc);
    if (rc == ncclSuccess) {
        *nranks = dc->nRanks;
        *lsa_size = dc->lsaSize;
    }
    return (int)rc;
}

extern "C" int ccbd_devcomm_destroy(void *destroy, void *comm, const void *devcomm) {
    return (int)((DevCommDestroy)destroy)((ncclComm_t)comm, (const ncclDevComm *)devcomm);
}

// One call's argument into `out` (ccbd_args_bytes).
extern "C" void ccbd_args(void *out, const void *devcomm, void *send, size_t send_offset,
                          void *recv, size_t recv_offset, size_t count) {
    DArgs a;
    memset(&a, 0, sizeof a);
    a.send = (ncclWindow_t)send;
    a.recv = (ncclWindow_t)recv;
    a.send_offset = send_offset;
    a.recv_offset = recv_offset;
    a.count = count;
    memcpy(&a.comm, devcomm, sizeof a.comm);
    memcpy(out, &a, sizeof a);
}
