/* ccbench_kit NCCL backend: the C side (ccbench_kit._nccl).
 *
 * No CUDA or NCCL header is needed to build this: the few types and enum
 * values used are declared here, and every function is resolved by name
 * from libcudart and libnccl opened at run time (dlopen/dlsym), so the kit
 * builds and imports on machines without CUDA.  Values are those of
 * cuda_runtime_api.h / driver_types.h (CUDA 11-13) and nccl.h (2.x).
 */
#ifndef CCBN_API_H
#define CCBN_API_H

#include <stddef.h>
#include <stdint.h>

typedef int cudaError_t;
typedef void *cudaStream_t;
typedef void *cudaEvent_t;
typedef void *cudaGraph_t;
typedef void *cudaGraphExec_t;
typedef int ncclResult_t;
typedef void *ncclComm_t;
typedef int ncclDataType_t;
typedef int ncclRedOp_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef struct { char reserved[64]; } cudaIpcMemHandle_t;
typedef int CUresult;
typedef void *CUmodule;
typedef void *CUfunction;

enum { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2, cudaMemcpyDeviceToDevice = 3 };
enum { cudaStreamNonBlocking = 1 };
enum { cudaStreamCaptureModeThreadLocal = 1 };
enum { cudaIpcMemLazyEnablePeerAccess = 1 };
enum { cudaDevAttrComputeCapabilityMajor = 75, cudaDevAttrComputeCapabilityMinor = 76 };
/* ncclCommWindowRegister's winFlags (nccl.h, NCCL >= 2.27) */
enum { NCCL_WIN_COLL_SYMMETRIC = 1 };
enum { ncclSuccess = 0, ncclInvalidArgument = 4, ncclInvalidUsage = 5, ncclInProgress = 7 };

/* Every function the backend uses; optional ones may be NULL. */
typedef struct ccbn_lib {
    void *cudart_handle, *nccl_handle;
    /* CUDA runtime */
    cudaError_t (*cudaGetDeviceCount)(int *);
    cudaError_t (*cudaSetDevice)(int);
    cudaError_t (*cudaGetDevice)(int *);
    cudaError_t (*cudaMalloc)(void **, size_t);
    cudaError_t (*cudaFree)(void *);
    cudaError_t (*cudaMemcpy)(void *, const void *, size_t, int);
    cudaError_t (*cudaMemcpyAsync)(void *, const void *, size_t, int, cudaStream_t);
    cudaError_t (*cudaMemset)(void *, int, size_t);
    cudaError_t (*cudaDeviceSynchronize)(void);
    cudaError_t (*cudaStreamCreateWithFlags)(cudaStream_t *, unsigned);
    cudaError_t (*cudaStreamDestroy)(cudaStream_t);
    cudaError_t (*cudaStreamSynchronize)(cudaStream_t);
    cudaError_t (*cudaEventCreate)(cudaEvent_t *);
    cudaError_t (*cudaEventDestroy)(cudaEvent_t);
    cudaError_t (*cudaEventRecord)(cudaEvent_t, cudaStream_t);
    cudaError_t (*cudaEventSynchronize)(cudaEvent_t);
    cudaError_t (*cudaEventElapsedTime)(float *, cudaEvent_t, cudaEvent_t);
    const char *(*cudaGetErrorString)(cudaError_t);
    cudaError_t (*cudaGetLastError)(void);
    cudaError_t (*cudaDeviceGetPCIBusId)(char *, int, int);
    cudaError_t (*cudaMemGetInfo)(size_t *, size_t *);
    cudaError_t (*cudaRuntimeGetVersion)(int *);
    cudaError_t (*cudaDriverGetVersion)(int *);
    cudaError_t (*cudaGetDeviceProperties)(void *, int);
    cudaError_t (*cudaStreamBeginCapture)(cudaStream_t, int);
    cudaError_t (*cudaStreamEndCapture)(cudaStream_t, cudaGraph_t *);
    cudaError_t (*cudaGraphInstantiateWithFlags)(cudaGraphExec_t *, cudaGraph_t, unsigned long long);
    cudaError_t (*cudaGraphLaunch)(cudaGraphExec_t, cudaStream_t);
    cudaError_t (*cudaGraphExecDestroy)(cudaGraphExec_t);
    cudaError_t (*cudaGraphDestroy)(cudaGraph_t);
    /* peer memory of the kit's own GPU algorithms (backends/gpu_kernels) */
    cudaError_t (*cudaIpcGetMemHandle)(cudaIpcMemHandle_t *, void *);
    cudaError_t (*cudaIpcOpenMemHandle)(void **, cudaIpcMemHandle_t, unsigned);
    cudaError_t (*cudaIpcCloseMemHandle)(void *);
    cudaError_t (*cudaDeviceCanAccessPeer)(int *, int, int);
    cudaError_t (*cudaDeviceGetByPCIBusId)(int *, const char *);
    cudaError_t (*cudaDeviceGetAttribute)(int *, int, int);
    /* CUDA driver (libcuda.so.1, optional): modules NVRTC compiled, and their launch */
    void *cuda_driver_handle;
    CUresult (*cuModuleLoadData)(CUmodule *, const void *);
    CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*cuModuleUnload)(CUmodule);
    CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                               unsigned, unsigned, cudaStream_t, void **, void **);
    CUresult (*cuGetErrorString)(CUresult, const char **);
    /* NCCL */
    ncclResult_t (*ncclGetVersion)(int *);
    ncclResult_t (*ncclGetUniqueId)(ncclUniqueId *);
    ncclResult_t (*ncclCommInitRank)(ncclComm_t *, int, ncclUniqueId, int);
    ncclResult_t (*ncclCommDestroy)(ncclComm_t);
    ncclResult_t (*ncclCommAbort)(ncclComm_t);
    ncclResult_t (*ncclCommFinalize)(ncclComm_t);              /* optional */
    const char *(*ncclGetErrorString)(ncclResult_t);
    const char *(*ncclGetLastError)(ncclComm_t);               /* optional */
    ncclResult_t (*ncclAllReduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
    ncclResult_t (*ncclAllGather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
    ncclResult_t (*ncclReduceScatter)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
    ncclResult_t (*ncclBroadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*ncclReduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*ncclSend)(const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*ncclRecv)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*ncclGroupStart)(void);
    ncclResult_t (*ncclGroupEnd)(void);
    /* NCCL >= 2.28: native alltoall, gather, scatter (optional) */
    ncclResult_t (*ncclAlltoAll)(const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
    ncclResult_t (*ncclGather)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*ncclScatter)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    /* NCCL >= 2.19: cuMem allocation and buffer registration (optional) */
    ncclResult_t (*ncclMemAlloc)(void **, size_t);
    ncclResult_t (*ncclMemFree)(void *);
    ncclResult_t (*ncclCommRegister)(ncclComm_t, void *, size_t, void **);
    ncclResult_t (*ncclCommDeregister)(ncclComm_t, void *);
    void (*ncclResetDebugInit)(void);                           /* optional */
    /* NCCL >= 2.27: symmetric window registration, -R 2 (optional) */
    ncclResult_t (*ncclCommWindowRegister)(ncclComm_t, void *, size_t, void **, int);
    ncclResult_t (*ncclCommWindowDeregister)(ncclComm_t, void *);
} ccbn_lib;

/* The one argument of every kernel of the kit's own GPU algorithms
 * (backends/gpu_kernels/common.cuh declares the same struct): this rank's
 * buffers, and every rank's staging buffer and flags in peer memory. */
#define CCBN_MAX_PEERS 8
typedef struct ccbn_kargs {
    uint64_t send, recv;                 /* this rank's buffers */
    uint64_t count;                      /* elements, as the NCCL call counts them */
    uint64_t stage[CCBN_MAX_PEERS];      /* each rank's staging buffer, mapped here */
    uint64_t signal[CCBN_MAX_PEERS];     /* each rank's flags, mapped here */
    uint64_t seq;                        /* this rank's call number and blocks done (2 x u32) */
    uint64_t half;                       /* bytes between the two halves of a staging buffer */
    int32_t rank, nranks;
} ccbn_kargs;

/* Collectives as the timed loop launches them: every line of
 * collectives.def, in its order (a collective whose NCCL form is NONE has an
 * id too, and the loop refuses it). */
enum {
#define CCB_COLL(ID, name, nccl) CCBN_##ID,
#include "collectives.def"
#undef CCB_COLL
    CCBN_NKINDS
};

/* The name of kind `kind` ("?" for none): _nccl.pyx builds its table from it. */
const char *ccbn_kind_name(int kind);

/* One collective call.  Counts are in elements, as the NCCL call counts
 * them (all_gather: each rank's part; reduce_scatter: each rank's result;
 * alltoall/gather/scatter: the block exchanged with one peer). */
typedef struct ccbn_call {
    int kind;
    int p2p;              /* 1: grouped ncclSend/ncclRecv even where a native call exists */
    const void *send;
    void *recv;
    size_t count, elsize;
    ncclDataType_t dtype;
    ncclRedOp_t op;
    int root, rank, nranks;
    ncclComm_t comm;
    cudaStream_t stream;
    const size_t *scounts, *sdispls, *rcounts, *rdispls;  /* alltoallv, per peer, elements */
    int send_to, recv_from;                               /* permute; -1 = none */
    /* the kit's own kernel (func != NULL): launched instead of an NCCL call */
    CUfunction func;
    unsigned grid, block;
    ccbn_kargs kargs;
    /* the kernel's one argument where it is not a ccbn_kargs (the device-API
     * kernels take NCCL's device communicator by value); NULL: &kargs */
    const void *param;
} ccbn_call;

/* Return codes: 0, or CCBN_E_NCCL + ncclResult_t, or CCBN_E_CUDA + cudaError_t. */
#define CCBN_E_ARG 1
#define CCBN_E_NOSYM 2
#define CCBN_E_NCCL 1000
#define CCBN_E_CUDA 100000
#define CCBN_E_CU 200000   /* + CUresult: the driver API's */

int ccbn_open(ccbn_lib *L, const char *cudart_path, const char *nccl_path, char *err, size_t errlen);
void ccbn_close(ccbn_lib *L);
/* What the last failing call was and why, into err. */
int ccbn_launch(const ccbn_lib *L, const ccbn_call *c, char *err, size_t errlen);
/* warmup*agg launches cycling through calls, then a stream sync. */
int ccbn_warm(const ccbn_lib *L, const ccbn_call *calls, int ncalls, int warmup, int agg,
              char *err, size_t errlen);
/* Timed iterations.  mode 0: an event pair around every iteration (lat_us
 * per iteration); mode 1: the host clock around all iterations and one
 * stream sync, as nccl-tests times (lat_us filled with the mean); mode 2:
 * the host clock around each iteration's enqueue, one sync after the last
 * (nccl-tests' -C 1 cputime).  start_us
 * gets each iteration's start on CLOCK_MONOTONIC, in µs. */
int ccbn_time(const ccbn_lib *L, const ccbn_call *calls, int ncalls, int mode, int iters,
              int agg, double *lat_us, double *start_us, char *err, size_t errlen);
/* CUDA-graph mode: capture iters*agg launches into one graph ... */
int ccbn_graph_build(const ccbn_lib *L, const ccbn_call *calls, int ncalls, int iters, int agg,
                     cudaGraph_t *graph, cudaGraphExec_t *exec, char *err, size_t errlen);
/* ... and time `launches` replays of it on the host clock (seconds in *sec). */
int ccbn_graph_time(const ccbn_lib *L, cudaGraphExec_t exec, cudaStream_t stream, int launches,
                    double *sec, char *err, size_t errlen);
double ccbn_monotonic_us(void);

#endif
