/* dtype sizes, MPI datatypes, and the MPI ops the `mpi` algorithm needs. */
#include "ccb.h"

static const size_t dtype_sizes[CCB_NDTYPES] = {1, 1, 2, 2, 2, 2, 4, 4, 4, 8, 8, 8, 1, 1};

/* fp16, bf16 and fp8 have no MPI datatype: they travel as 16- or 8-bit
 * words and are reduced by user ops, one per (dtype, op), created once at
 * module init. */
enum { SMALL_FLOATS = 4 };
static MPI_Op small_ops[SMALL_FLOATS][CCB_NOPS];
static int small_ops_ready;

static int small_float_index(ccb_dtype t) {
    switch (t) {
    case CCB_FLOAT16: return 0;
    case CCB_BFLOAT16: return 1;
    case CCB_FLOAT8E4M3: return 2;
    case CCB_FLOAT8E5M2: return 3;
    default: return -1;
    }
}

size_t ccb_dtype_size(ccb_dtype t) {
    return (t >= 0 && t < CCB_NDTYPES) ? dtype_sizes[t] : 0;
}

MPI_Datatype ccb_mpi_datatype(ccb_dtype t) {
    switch (t) {
    case CCB_UINT8: return MPI_UINT8_T;
    case CCB_INT8: return MPI_INT8_T;
    case CCB_UINT16: return MPI_UINT16_T;
    case CCB_INT16: return MPI_INT16_T;
    case CCB_FLOAT16: return MPI_UINT16_T;
    case CCB_BFLOAT16: return MPI_UINT16_T;
    case CCB_UINT32: return MPI_UINT32_T;
    case CCB_INT32: return MPI_INT32_T;
    case CCB_FLOAT32: return MPI_FLOAT;
    case CCB_INT64: return MPI_INT64_T;
    case CCB_UINT64: return MPI_UINT64_T;
    case CCB_FLOAT64: return MPI_DOUBLE;
    case CCB_FLOAT8E4M3: return MPI_UINT8_T;
    case CCB_FLOAT8E5M2: return MPI_UINT8_T;
    default: return MPI_DATATYPE_NULL;
    }
}

#define HALF_OP(NAME, DT, OP)                                                  \
    static void NAME(void *in, void *inout, int *len, MPI_Datatype *dt) {      \
        (void)dt;                                                              \
        ccb_reduce_local(in, inout, (size_t)*len, DT, OP);                     \
    }
HALF_OP(f16_sum, CCB_FLOAT16, CCB_SUM)
HALF_OP(f16_prod, CCB_FLOAT16, CCB_PROD)
HALF_OP(f16_min, CCB_FLOAT16, CCB_MIN)
HALF_OP(f16_max, CCB_FLOAT16, CCB_MAX)
HALF_OP(bf16_sum, CCB_BFLOAT16, CCB_SUM)
HALF_OP(bf16_prod, CCB_BFLOAT16, CCB_PROD)
HALF_OP(bf16_min, CCB_BFLOAT16, CCB_MIN)
HALF_OP(bf16_max, CCB_BFLOAT16, CCB_MAX)
HALF_OP(e4m3_sum, CCB_FLOAT8E4M3, CCB_SUM)
HALF_OP(e4m3_prod, CCB_FLOAT8E4M3, CCB_PROD)
HALF_OP(e4m3_min, CCB_FLOAT8E4M3, CCB_MIN)
HALF_OP(e4m3_max, CCB_FLOAT8E4M3, CCB_MAX)
HALF_OP(e5m2_sum, CCB_FLOAT8E5M2, CCB_SUM)
HALF_OP(e5m2_prod, CCB_FLOAT8E5M2, CCB_PROD)
HALF_OP(e5m2_min, CCB_FLOAT8E5M2, CCB_MIN)
HALF_OP(e5m2_max, CCB_FLOAT8E5M2, CCB_MAX)

int ccb_types_init(void) {
    if (small_ops_ready) return MPI_SUCCESS;
    MPI_User_function *fns[SMALL_FLOATS][4] = {
        {f16_sum, f16_prod, f16_min, f16_max},
        {bf16_sum, bf16_prod, bf16_min, bf16_max},
        {e4m3_sum, e4m3_prod, e4m3_min, e4m3_max},
        {e5m2_sum, e5m2_prod, e5m2_min, e5m2_max},
    };
    for (int h = 0; h < SMALL_FLOATS; h++) {
        for (int o = 0; o < 4; o++) CCB_CHECK(MPI_Op_create(fns[h][o], 1, &small_ops[h][o]));
        small_ops[h][CCB_AVG] = small_ops[h][CCB_SUM];
    }
    small_ops_ready = 1;
    return MPI_SUCCESS;
}

void ccb_types_finalize(void) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!small_ops_ready || finalized) return;
    for (int h = 0; h < SMALL_FLOATS; h++)
        for (int o = 0; o < 4; o++) MPI_Op_free(&small_ops[h][o]);
    small_ops_ready = 0;
}

MPI_Op ccb_mpi_op(ccb_dtype t, ccb_op op) {
    if (op < 0 || op >= CCB_NOPS) return MPI_OP_NULL;
    if (small_float_index(t) >= 0)
        return small_ops_ready ? small_ops[small_float_index(t)][op] : MPI_OP_NULL;
    switch (op) {
    case CCB_SUM: case CCB_AVG: return MPI_SUM;
    case CCB_PROD: return MPI_PROD;
    case CCB_MIN: return MPI_MIN;
    case CCB_MAX: return MPI_MAX;
    default: return MPI_OP_NULL;
    }
}

/* The MPI this extension was compiled against, in the words
 * MPI_Get_library_version starts with, so the import check can compare. */
#define CCB_STR2(x) #x
#define CCB_STR(x) CCB_STR2(x)
const char *ccb_mpi_build_id(void) {
#if defined(OMPI_MAJOR_VERSION)
    return "Open MPI v" CCB_STR(OMPI_MAJOR_VERSION) "." CCB_STR(OMPI_MINOR_VERSION) "." CCB_STR(OMPI_RELEASE_VERSION);
#elif defined(MPICH_VERSION)
    return "MPICH Version:\t" MPICH_VERSION;
#else
    return "unknown MPI";
#endif
}
