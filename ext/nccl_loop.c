/* The NCCL backend's C side: symbols resolved at run time, collective
 * launches, and the timed loops.  Runs with the GIL released. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nccl_api.h"

static void seterr(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

double ccbn_monotonic_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

#define SYM(handle, field, name, required)                                          \
    do {                                                                            \
        *(void **)(&L->field) = dlsym(handle, name);                                \
        if ((required) && !L->field) {                                              \
            seterr(err, errlen, "%s has no symbol %s", which, name);                \
            return CCBN_E_NOSYM;                                                    \
        }                                                                           \
    } while (0)

int ccbn_open(ccbn_lib *L, const char *cudart_path, const char *nccl_path, char *err, size_t errlen) {
    memset(L, 0, sizeof(*L));
    L->cudart_handle = dlopen(cudart_path, RTLD_NOW | RTLD_LOCAL);
    if (!L->cudart_handle) {
        seterr(err, errlen, "cannot load %s: %s", cudart_path, dlerror());
        return CCBN_E_NOSYM;
    }
    L->nccl_handle = dlopen(nccl_path, RTLD_NOW | RTLD_LOCAL);
    if (!L->nccl_handle) {
        seterr(err, errlen, "cannot load %s: %s", nccl_path, dlerror());
        return CCBN_E_NOSYM;
    }
    void *h = L->cudart_handle;
    const char *which = cudart_path;
    SYM(h, cudaGetDeviceCount, "cudaGetDeviceCount", 1);
    SYM(h, cudaSetDevice, "cudaSetDevice", 1);
    SYM(h, cudaGetDevice, "cudaGetDevice", 1);
    SYM(h, cudaMalloc, "cudaMalloc", 1);
    SYM(h, cudaFree, "cudaFree", 1);
    SYM(h, cudaMemcpy, "cudaMemcpy", 1);
    SYM(h, cudaMemcpyAsync, "cudaMemcpyAsync", 1);
    SYM(h, cudaMemset, "cudaMemset", 1);
    SYM(h, cudaDeviceSynchronize, "cudaDeviceSynchronize", 1);
    SYM(h, cudaStreamCreateWithFlags, "cudaStreamCreateWithFlags", 1);
    SYM(h, cudaStreamDestroy, "cudaStreamDestroy", 1);
    SYM(h, cudaStreamSynchronize, "cudaStreamSynchronize", 1);
    SYM(h, cudaEventCreate, "cudaEventCreate", 1);
    SYM(h, cudaEventDestroy, "cudaEventDestroy", 1);
    SYM(h, cudaEventRecord, "cudaEventRecord", 1);
    SYM(h, cudaEventSynchronize, "cudaEventSynchronize", 1);
    SYM(h, cudaEventElapsedTime, "cudaEventElapsedTime", 1);
    SYM(h, cudaGetErrorString, "cudaGetErrorString", 1);
    SYM(h, cudaGetLastError, "cudaGetLastError", 1);
    SYM(h, cudaDeviceGetPCIBusId, "cudaDeviceGetPCIBusId", 1);
    SYM(h, cudaMemGetInfo, "cudaMemGetInfo", 1);
    SYM(h, cudaRuntimeGetVersion, "cudaRuntimeGetVersion", 1);
    SYM(h, cudaDriverGetVersion, "cudaDriverGetVersion", 1);
    /* CUDA 12+ versions the properties struct; the name is its first field in all. */
    SYM(h, cudaGetDeviceProperties, "cudaGetDeviceProperties_v2", 0);
    if (!L->cudaGetDeviceProperties) SYM(h, cudaGetDeviceProperties, "cudaGetDeviceProperties", 1);
    SYM(h, cudaStreamBeginCapture, "cudaStreamBeginCapture", 1);
    SYM(h, cudaStreamEndCapture, "cudaStreamEndCapture", 1);
    SYM(h, cudaGraphInstantiateWithFlags, "cudaGraphInstantiateWithFlags", 1);
    SYM(h, cudaGraphLaunch, "cudaGraphLaunch", 1);
    SYM(h, cudaGraphExecDestroy, "cudaGraphExecDestroy", 1);
    SYM(h, cudaGraphDestroy, "cudaGraphDestroy", 1);
    SYM(h, cudaIpcGetMemHandle, "cudaIpcGetMemHandle", 0);
    SYM(h, cudaIpcOpenMemHandle, "cudaIpcOpenMemHandle", 0);
    SYM(h, cudaIpcCloseMemHandle, "cudaIpcCloseMemHandle", 0);
    SYM(h, cudaDeviceCanAccessPeer, "cudaDeviceCanAccessPeer", 0);
    SYM(h, cudaDeviceGetByPCIBusId, "cudaDeviceGetByPCIBusId", 0);
    SYM(h, cudaDeviceGetAttribute, "cudaDeviceGetAttribute", 0);
    /* the driver comes with the GPU driver, not a wheel: optional, as the
     * kit's own kernels are (they say why they can't run when it's missing) */
    L->cuda_driver_handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (L->cuda_driver_handle) {
        h = L->cuda_driver_handle;
        which = "libcuda.so.1";
        SYM(h, cuModuleLoadData, "cuModuleLoadData", 0);
        SYM(h, cuModuleGetFunction, "cuModuleGetFunction", 0);
        SYM(h, cuModuleUnload, "cuModuleUnload", 0);
        SYM(h, cuLaunchKernel, "cuLaunchKernel", 0);
        SYM(h, cuGetErrorString, "cuGetErrorString", 0);
    }

    h = L->nccl_handle;
    which = nccl_path;
    SYM(h, ncclGetVersion, "ncclGetVersion", 1);
    SYM(h, ncclGetUniqueId, "ncclGetUniqueId", 1);
    SYM(h, ncclCommInitRank, "ncclCommInitRank", 1);
    SYM(h, ncclCommDestroy, "ncclCommDestroy", 1);
    SYM(h, ncclCommAbort, "ncclCommAbort", 1);
    SYM(h, ncclCommFinalize, "ncclCommFinalize", 0);
    SYM(h, ncclGetErrorString, "ncclGetErrorString", 1);
    SYM(h, ncclGetLastError, "ncclGetLastError", 0);
    SYM(h, ncclAllReduce, "ncclAllReduce", 1);
    SYM(h, ncclAllGather, "ncclAllGather", 1);
    SYM(h, ncclReduceScatter, "ncclReduceScatter", 1);
    SYM(h, ncclBroadcast, "ncclBroadcast", 1);
    SYM(h, ncclReduce, "ncclReduce", 1);
    SYM(h, ncclSend, "ncclSend", 1);
    SYM(h, ncclRecv, "ncclRecv", 1);
    SYM(h, ncclGroupStart, "ncclGroupStart", 1);
    SYM(h, ncclGroupEnd, "ncclGroupEnd", 1);
    SYM(h, ncclAlltoAll, "ncclAlltoAll", 0);
    SYM(h, ncclGather, "ncclGather", 0);
    SYM(h, ncclScatter, "ncclScatter", 0);
    SYM(h, ncclMemAlloc, "ncclMemAlloc", 0);
    SYM(h, ncclMemFree, "ncclMemFree", 0);
    SYM(h, ncclCommRegister, "ncclCommRegister", 0);
    SYM(h, ncclCommDeregister, "ncclCommDeregister", 0);
    SYM(h, ncclResetDebugInit, "ncclResetDebugInit", 0);
    SYM(h, ncclCommWindowRegister, "ncclCommWindowRegister", 0);
    SYM(h, ncclCommWindowDeregister, "ncclCommWindowDeregister", 0);
    return 0;
}

void ccbn_close(ccbn_lib *L) {
    /* NCCL keeps threads and atexit handlers: never dlclose it. */
    (void)L;
}

const char *ccbn_kind_name(int kind) {
    static const char *names[CCBN_NKINDS] = {
#define CCB_COLL(ID, name, nccl) #name,
#include "collectives.def"
#undef CCB_COLL
    };
    return (kind >= 0 && kind < CCBN_NKINDS) ? names[kind] : "?";
}

static int nccl_fail(const ccbn_lib *L, const ccbn_call *c, const char *what, ncclResult_t r,
                     char *err, size_t errlen) {
    const char *last = (L->ncclGetLastError && c) ? L->ncclGetLastError(c->comm) : NULL;
    seterr(err, errlen, "%s (%s): %s%s%s", what, c ? ccbn_kind_name(c->kind) : "",
           L->ncclGetErrorString(r), (last && *last) ? ": " : "", (last && *last) ? last : "");
    return CCBN_E_NCCL + r;
}

static int cuda_fail(const ccbn_lib *L, const char *what, cudaError_t e, char *err, size_t errlen) {
    seterr(err, errlen, "%s: %s (CUDA error %d)", what, L->cudaGetErrorString(e), e);
    return CCBN_E_CUDA + e;
}

#define NCHECK(call, what)                                                  \
    do {                                                                    \
        ncclResult_t r_ = (call);                                           \
        if (r_ != ncclSuccess) { rc = nccl_fail(L, c, what, r_, err, errlen); goto out; } \
    } while (0)

/* Grouped point-to-point forms, as nccl-tests writes them. */
static int launch_p2p(const ccbn_lib *L, const ccbn_call *c, char *err, size_t errlen) {
    const char *s = (const char *)c->send;
    char *d = (char *)c->recv;
    size_t es = c->elsize, n = c->count;
    int p = c->nranks, me = c->rank, rc = 0, grouped = 0;
    if (c->kind == CCBN_HYPERCUBE) {
        /* own block into place, then log2(p) exchanges of doubling size */
        size_t blk = n * es;
        if (d + (size_t)me * blk != s) {
            cudaError_t e = L->cudaMemcpyAsync(d + (size_t)me * blk, s, blk, cudaMemcpyDeviceToDevice, c->stream);
            if (e) return cuda_fail(L, "cudaMemcpyAsync (hypercube)", e, err, errlen);
        }
        for (int mask = 1; mask < p; mask <<= 1) {
            int lo = me & ~(mask - 1), other = lo ^ mask;
            NCHECK(L->ncclGroupStart(), "ncclGroupStart");
            grouped = 1;
            NCHECK(L->ncclSend(d + (size_t)lo * blk, n * mask, c->dtype, me ^ mask, c->comm, c->stream), "ncclSend");
            NCHECK(L->ncclRecv(d + (size_t)other * blk, n * mask, c->dtype, me ^ mask, c->comm, c->stream), "ncclRecv");
            grouped = 0;
            NCHECK(L->ncclGroupEnd(), "ncclGroupEnd");
        }
        return 0;
    }
    NCHECK(L->ncclGroupStart(), "ncclGroupStart");
    grouped = 1;
    switch (c->kind) {
    case CCBN_ALLTOALL:
        for (int r = 0; r < p; r++) {
            NCHECK(L->ncclSend(s + (size_t)r * n * es, n, c->dtype, r, c->comm, c->stream), "ncclSend");
            NCHECK(L->ncclRecv(d + (size_t)r * n * es, n, c->dtype, r, c->comm, c->stream), "ncclRecv");
        }
        break;
    case CCBN_ALLTOALLV:
        for (int r = 0; r < p; r++) {
            if (c->scounts[r])
                NCHECK(L->ncclSend(s + c->sdispls[r] * es, c->scounts[r], c->dtype, r, c->comm, c->stream), "ncclSend");
            if (c->rcounts[r])
                NCHECK(L->ncclRecv(d + c->rdispls[r] * es, c->rcounts[r], c->dtype, r, c->comm, c->stream), "ncclRecv");
        }
        break;
    case CCBN_GATHER:
        NCHECK(L->ncclSend(s, n, c->dtype, c->root, c->comm, c->stream), "ncclSend");
        if (me == c->root)
            for (int r = 0; r < p; r++)
                NCHECK(L->ncclRecv(d + (size_t)r * n * es, n, c->dtype, r, c->comm, c->stream), "ncclRecv");
        break;
    case CCBN_SCATTER:
        if (me == c->root)
            for (int r = 0; r < p; r++)
                NCHECK(L->ncclSend(s + (size_t)r * n * es, n, c->dtype, r, c->comm, c->stream), "ncclSend");
        NCHECK(L->ncclRecv(d, n, c->dtype, c->root, c->comm, c->stream), "ncclRecv");
        break;
    case CCBN_SENDRECV:
        NCHECK(L->ncclSend(s, n, c->dtype, (me + 1) % p, c->comm, c->stream), "ncclSend");
        NCHECK(L->ncclRecv(d, n, c->dtype, (me - 1 + p) % p, c->comm, c->stream), "ncclRecv");
        break;
    case CCBN_PERMUTE:
        if (c->send_to >= 0) NCHECK(L->ncclSend(s, n, c->dtype, c->send_to, c->comm, c->stream), "ncclSend");
        if (c->recv_from >= 0) NCHECK(L->ncclRecv(d, n, c->dtype, c->recv_from, c->comm, c->stream), "ncclRecv");
        break;
    default:
        seterr(err, errlen, "no point-to-point form of %s", ccbn_kind_name(c->kind));
        rc = CCBN_E_ARG;
        goto out;
    }
    grouped = 0;
    NCHECK(L->ncclGroupEnd(), "ncclGroupEnd");
out:
    if (grouped) L->ncclGroupEnd();  /* leave no group open after a failure */
    return rc;
}

/* One of the kit's own kernels: one argument, the call's ccbn_kargs or its param. */
static int launch_own(const ccbn_lib *L, const ccbn_call *c, char *err, size_t errlen) {
    void *params[1] = {c->param ? (void *)c->param : (void *)&c->kargs};
    if (!L->cuLaunchKernel) {
        seterr(err, errlen, "cuLaunchKernel: libcuda.so.1 was not loaded");
        return CCBN_E_ARG;
    }
    CUresult r = L->cuLaunchKernel(c->func, c->grid, 1, 1, c->block, 1, 1, 0, c->stream, params, NULL);
    if (r) {
        const char *s = NULL;
        if (L->cuGetErrorString) L->cuGetErrorString(r, &s);
        seterr(err, errlen, "cuLaunchKernel (%s): %s (CUresult %d)", ccbn_kind_name(c->kind),
               s ? s : "unknown error", r);
        return CCBN_E_CU + r;
    }
    return 0;
}

int ccbn_launch(const ccbn_lib *L, const ccbn_call *c, char *err, size_t errlen) {
    int rc = 0;
    if (c->func) return launch_own(L, c, err, errlen);
    switch (c->kind) {
    case CCBN_ALL_REDUCE:
        NCHECK(L->ncclAllReduce(c->send, c->recv, c->count, c->dtype, c->op, c->comm, c->stream), "ncclAllReduce");
        break;
    case CCBN_ALL_GATHER:
        NCHECK(L->ncclAllGather(c->send, c->recv, c->count, c->dtype, c->comm, c->stream), "ncclAllGather");
        break;
    case CCBN_REDUCE_SCATTER:
        NCHECK(L->ncclReduceScatter(c->send, c->recv, c->count, c->dtype, c->op, c->comm, c->stream), "ncclReduceScatter");
        break;
    case CCBN_BROADCAST:
        NCHECK(L->ncclBroadcast(c->send, c->recv, c->count, c->dtype, c->root, c->comm, c->stream), "ncclBroadcast");
        break;
    case CCBN_REDUCE:
        NCHECK(L->ncclReduce(c->send, c->recv, c->count, c->dtype, c->op, c->root, c->comm, c->stream), "ncclReduce");
        break;
    case CCBN_ALLTOALL:
        if (c->p2p || !L->ncclAlltoAll) return launch_p2p(L, c, err, errlen);
        NCHECK(L->ncclAlltoAll(c->send, c->recv, c->count, c->dtype, c->comm, c->stream), "ncclAlltoAll");
        break;
    case CCBN_GATHER:
        if (c->p2p || !L->ncclGather) return launch_p2p(L, c, err, errlen);
        NCHECK(L->ncclGather(c->send, c->recv, c->count, c->dtype, c->root, c->comm, c->stream), "ncclGather");
        break;
    case CCBN_SCATTER:
        if (c->p2p || !L->ncclScatter) return launch_p2p(L, c, err, errlen);
        NCHECK(L->ncclScatter(c->send, c->recv, c->count, c->dtype, c->root, c->comm, c->stream), "ncclScatter");
        break;
    default:
        return launch_p2p(L, c, err, errlen);
    }
out:
    return rc;
}

/* One timed iteration: agg launches, grouped when aggregated (nccl-tests -m). */
static int iteration(const ccbn_lib *L, const ccbn_call *calls, int ncalls, int agg, int *k,
                     char *err, size_t errlen) {
    int rc = 0;
    const ccbn_call *c = &calls[0];
    if (agg > 1) NCHECK(L->ncclGroupStart(), "ncclGroupStart");
    for (int j = 0; j < agg && rc == 0; j++) rc = ccbn_launch(L, &calls[(*k)++ % ncalls], err, errlen);
    if (agg > 1) {
        ncclResult_t r = L->ncclGroupEnd();
        if (rc == 0 && r != ncclSuccess) rc = nccl_fail(L, c, "ncclGroupEnd", r, err, errlen);
    }
out:
    return rc;
}

#define CCHECK(call, what)                                                       \
    do {                                                                         \
        cudaError_t e_ = (call);                                                 \
        if (e_) { rc = cuda_fail(L, what, e_, err, errlen); goto done; }         \
    } while (0)

int ccbn_warm(const ccbn_lib *L, const ccbn_call *calls, int ncalls, int warmup, int agg,
              char *err, size_t errlen) {
    int rc = 0, k = 0;
    if (ncalls < 1 || agg < 1 || warmup < 0) { seterr(err, errlen, "bad loop arguments"); return CCBN_E_ARG; }
    for (int i = 0; i < warmup && rc == 0; i++) rc = iteration(L, calls, ncalls, agg, &k, err, errlen);
    if (rc) return rc;
    CCHECK(L->cudaStreamSynchronize(calls[0].stream), "cudaStreamSynchronize");
done:
    return rc;
}

int ccbn_time(const ccbn_lib *L, const ccbn_call *calls, int ncalls, int mode, int iters,
              int agg, double *lat_us, double *start_us, char *err, size_t errlen) {
    int rc = 0, k = 0;
    cudaStream_t st = calls[0].stream;
    if (ncalls < 1 || agg < 1 || iters < 1) { seterr(err, errlen, "bad loop arguments"); return CCBN_E_ARG; }
    if (mode == 1) {
        /* nccl-tests' BenchTime: host clock around the enqueues and one sync. */
        double t0 = ccbn_monotonic_us();
        for (int i = 0; i < iters && rc == 0; i++) rc = iteration(L, calls, ncalls, agg, &k, err, errlen);
        if (rc) { L->cudaStreamSynchronize(st); return rc; }
        cudaError_t e = L->cudaStreamSynchronize(st);
        if (e) return cuda_fail(L, "cudaStreamSynchronize", e, err, errlen);
        double per = (ccbn_monotonic_us() - t0) / ((double)iters * agg);
        for (int i = 0; i < iters; i++) {
            lat_us[i] = per;
            if (start_us) start_us[i] = t0 + i * per * agg;
        }
        return 0;
    }
    if (mode == 2) {
        /* nccl-tests -C 1 (report_cputime): the host's time to enqueue each
         * iteration, the stream synchronised once after the last. */
        for (int i = 0; i < iters && rc == 0; i++) {
            double t0 = ccbn_monotonic_us();
            rc = iteration(L, calls, ncalls, agg, &k, err, errlen);
            lat_us[i] = (ccbn_monotonic_us() - t0) / agg;
            if (start_us) start_us[i] = t0;
        }
        cudaError_t e = L->cudaStreamSynchronize(st);
        if (rc) return rc;
        if (e) return cuda_fail(L, "cudaStreamSynchronize", e, err, errlen);
        return 0;
    }
    /* Per-iteration events; ev[0] anchors device time to the host clock. */
    int nev = 2 * iters + 1;
    cudaEvent_t *ev = calloc((size_t)nev, sizeof(cudaEvent_t));
    if (!ev) { seterr(err, errlen, "out of host memory"); return CCBN_E_ARG; }
    int made = 0;
    for (; made < nev; made++) CCHECK(L->cudaEventCreate(&ev[made]), "cudaEventCreate");
    CCHECK(L->cudaEventRecord(ev[0], st), "cudaEventRecord");
    CCHECK(L->cudaEventSynchronize(ev[0]), "cudaEventSynchronize");
    double host0 = ccbn_monotonic_us();
    for (int i = 0; i < iters; i++) {
        CCHECK(L->cudaEventRecord(ev[1 + 2 * i], st), "cudaEventRecord");
        rc = iteration(L, calls, ncalls, agg, &k, err, errlen);
        if (rc) { L->cudaStreamSynchronize(st); goto done; }
        CCHECK(L->cudaEventRecord(ev[2 + 2 * i], st), "cudaEventRecord");
    }
    CCHECK(L->cudaStreamSynchronize(st), "cudaStreamSynchronize");
    for (int i = 0; i < iters; i++) {
        float ms = 0, ms0 = 0;
        CCHECK(L->cudaEventElapsedTime(&ms, ev[1 + 2 * i], ev[2 + 2 * i]), "cudaEventElapsedTime");
        CCHECK(L->cudaEventElapsedTime(&ms0, ev[0], ev[1 + 2 * i]), "cudaEventElapsedTime");
        lat_us[i] = ms * 1e3 / agg;
        if (start_us) start_us[i] = host0 + ms0 * 1e3;
    }
done:
    for (int i = 0; i < made; i++) L->cudaEventDestroy(ev[i]);
    free(ev);
    return rc;
}

int ccbn_graph_build(const ccbn_lib *L, const ccbn_call *calls, int ncalls, int iters, int agg,
                     cudaGraph_t *graph, cudaGraphExec_t *exec, char *err, size_t errlen) {
    int rc = 0, k = 0;
    cudaStream_t st = calls[0].stream;
    *graph = NULL;
    *exec = NULL;
    if (ncalls < 1 || agg < 1 || iters < 1) { seterr(err, errlen, "bad loop arguments"); return CCBN_E_ARG; }
    CCHECK(L->cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    for (int i = 0; i < iters && rc == 0; i++) rc = iteration(L, calls, ncalls, agg, &k, err, errlen);
    {
        cudaError_t e = L->cudaStreamEndCapture(st, graph);
        if (rc) goto done;
        if (e) { rc = cuda_fail(L, "cudaStreamEndCapture", e, err, errlen); goto done; }
    }
    CCHECK(L->cudaGraphInstantiateWithFlags(exec, *graph, 0), "cudaGraphInstantiate");
done:
    if (rc && *graph) { L->cudaGraphDestroy(*graph); *graph = NULL; }
    return rc;
}

int ccbn_graph_time(const ccbn_lib *L, cudaGraphExec_t exec, cudaStream_t stream, int launches,
                    double *sec, char *err, size_t errlen) {
    int rc = 0;
    double t0 = ccbn_monotonic_us();
    for (int l = 0; l < launches; l++) CCHECK(L->cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
    CCHECK(L->cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    *sec = (ccbn_monotonic_us() - t0) * 1e-6;
done:
    return rc;
}
