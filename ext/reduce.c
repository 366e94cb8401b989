/* Local reductions for every dtype and op.  fp16, bf16 and fp8 go through
 * float: convert, combine, round to nearest even (fp8: saturating at the
 * largest finite value, as CUDA's satfinite conversions). */
#include <string.h>
#include <math.h>
#include "ccb.h"

static inline float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) { bits = sign; }
        else {  /* subnormal: normalise */
            int e = -1;
            do { e++; man <<= 1; } while (!(man & 0x400));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f; memcpy(&f, &bits, 4); return f;
}

static inline uint16_t f32_to_f16(float f) {
    uint32_t x; memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u)  /* inf or nan */
        return (uint16_t)(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0));
    if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00);  /* overflow rounds to inf */
    if (absx < 0x38800000u) {  /* subnormal or zero in fp16 */
        if (absx < 0x33000000u) return (uint16_t)sign;
        uint32_t e = absx >> 23, m = (absx & 0x7fffff) | 0x800000;
        uint32_t s = 126 - e;  /* value / 2^-24 = m * 2^(e - 126) */
        uint32_t r = m >> s, rem = m & ((1u << s) - 1), mid = 1u << (s - 1);
        if (rem > mid || (rem == mid && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = absx - 0x38000000u;  /* rebias exponent 127 -> 15 */
    uint32_t lsb = (r >> 13) & 1;
    r += 0xfff + lsb;
    return (uint16_t)(sign | (r >> 13));
}

static inline float bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16; float f; memcpy(&f, &bits, 4); return f;
}

static inline uint16_t f32_to_bf16(float f) {
    uint32_t x; memcpy(&x, &f, 4);
    uint32_t nan = (x & 0x7fffffffu) > 0x7f800000u;  /* branch-free, so loops vectorize */
    uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    return (uint16_t)(nan ? (x >> 16) | 0x40u : rounded);  /* a quiet nan stays nan */
}

/* fp8 (OCP): E exponent bits, M mantissa bits, bias 2^(E-1) - 1.  e4m3
 * ("fn") has no infinities and one NaN per sign (S.1111.111); e5m2 is
 * IEEE-like.  Decoding is exact in float. */
static inline float fp8_to_f32(uint8_t v, int E, int M, int ieee) {
    int bias = (1 << (E - 1)) - 1, exp = (v >> M) & ((1 << E) - 1), man = v & ((1 << M) - 1);
    float sign = (v & 0x80) ? -1.0f : 1.0f;
    if (exp == (1 << E) - 1) {
        if (ieee) return man ? NAN : sign * INFINITY;
        if (man == (1 << M) - 1) return NAN;
    }
    if (exp == 0) return sign * ldexpf((float)man, 1 - bias - M);
    return sign * ldexpf((float)((1 << M) | man), exp - bias - M);
}

static inline uint8_t f32_to_fp8(float f, int E, int M, int ieee) {
    int bias = (1 << (E - 1)) - 1;
    uint8_t sign = signbit(f) ? 0x80 : 0;
    if (isnan(f)) return ieee ? 0x7e : 0x7f;
    /* the largest finite code: S.11110.11 (e5m2), S.1111.110 (e4m3) */
    uint8_t maxcode = ieee ? (uint8_t)((((1 << E) - 2) << M) | ((1 << M) - 1))
                           : (uint8_t)((((1 << E) - 1) << M) | ((1 << M) - 2));
    float a = fabsf(f), maxval = fp8_to_f32(maxcode, E, M, ieee);
    if (a >= maxval) return sign | maxcode;
    if (a == 0.0f) return sign;
    int e;
    frexpf(a, &e);  /* a = m * 2^e, m in [0.5, 1) */
    int ue = e - 1;  /* unbiased exponent of a normal number */
    if (ue < 1 - bias) ue = 1 - bias;  /* subnormal: the smallest exponent's step */
    /* a in units of the last mantissa bit, rounded to nearest even (the
     * default rounding mode of nearbyintf) */
    float q = nearbyintf(ldexpf(a, M - ue));
    unsigned code;
    if (ue == 1 - bias && q < (float)(1 << M)) code = (unsigned)q;  /* subnormal or zero */
    else {
        unsigned qi = (unsigned)q;  /* in [2^M, 2^(M+1)] */
        if (qi == (2u << M)) { qi = 1u << M; ue++; }
        code = ((unsigned)(ue + bias) << M) | (qi - (1u << M));
    }
    if (code > maxcode) code = maxcode;
    return (uint8_t)(sign | code);
}

static inline float e4m3_to_f32(uint8_t v) { return fp8_to_f32(v, 4, 3, 0); }
static inline uint8_t f32_to_e4m3(float f) { return f32_to_fp8(f, 4, 3, 0); }
static inline float e5m2_to_f32(uint8_t v) { return fp8_to_f32(v, 5, 2, 1); }
static inline uint8_t f32_to_e5m2(float f) { return f32_to_fp8(f, 5, 2, 1); }

#define OP_SUM(a, b) ((a) + (b))
#define OP_PROD(a, b) ((a) * (b))
/* min/max propagate NaN from either side, as numpy's minimum/maximum (the
 * self-comparison folds away for integers). */
#define OP_MIN(a, b) (((b) < (a) || (b) != (b)) ? (b) : (a))
#define OP_MAX(a, b) (((b) > (a) || (b) != (b)) ? (b) : (a))

/* out[i] = b[i] OP c[i] in C type T; out may alias b or c. */
#define LOOP(T, OPM)                                                            \
    do {                                                                        \
        const T *xb = (const T *)b, *xc = (const T *)c;                         \
        T *o = (T *)out;                                                        \
        for (size_t i = 0; i < n; i++) o[i] = (T)OPM(xb[i], xc[i]);             \
    } while (0)

/* Integer sums and products wrap around (two's complement), as NCCL's do:
 * computed in the unsigned type U (at least unsigned int, so that promotion
 * never makes a signed multiplication), which C defines to wrap. */
#define WRAP(T, U, OPM)                                                         \
    do {                                                                        \
        const T *xb = (const T *)b, *xc = (const T *)c;                         \
        T *o = (T *)out;                                                        \
        for (size_t i = 0; i < n; i++) o[i] = (T)(U)OPM((U)xb[i], (U)xc[i]);    \
    } while (0)

/* fp16/bf16 (T = uint16_t) and fp8 (uint8_t): decode to float, combine, round back. */
#define NARROW(T, TO, FROM, OPM)                                                \
    do {                                                                        \
        const T *hb = (const T *)b, *hc = (const T *)c;                         \
        T *o = (T *)out;                                                        \
        for (size_t i = 0; i < n; i++) o[i] = FROM(OPM(TO(hb[i]), TO(hc[i])));  \
    } while (0)

#define INTEGER(T, U)                                                           \
    switch (op) {                                                               \
    case CCB_SUM: case CCB_AVG: WRAP(T, U, OP_SUM); break;                      \
    case CCB_PROD: WRAP(T, U, OP_PROD); break;                                  \
    case CCB_MIN: LOOP(T, OP_MIN); break;                                       \
    case CCB_MAX: LOOP(T, OP_MAX); break;                                       \
    default: return CCB_ERR_UNSUPPORTED;                                        \
    }

#define DISPATCH_OP(MACRO, ...)                                                 \
    switch (op) {                                                               \
    case CCB_SUM: case CCB_AVG: MACRO(__VA_ARGS__, OP_SUM); break;              \
    case CCB_PROD: MACRO(__VA_ARGS__, OP_PROD); break;                          \
    case CCB_MIN: MACRO(__VA_ARGS__, OP_MIN); break;                            \
    case CCB_MAX: MACRO(__VA_ARGS__, OP_MAX); break;                            \
    default: return CCB_ERR_UNSUPPORTED;                                        \
    }

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
/* fp16 through the F16C conversions, 8 at a time: the same IEEE float32
 * operation and round-to-nearest-even as the scalar code, 5x faster. */
__attribute__((target("avx,f16c")))
static size_t f16c_loop(const uint16_t *b, const uint16_t *c, uint16_t *o, size_t n, ccb_op op) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + i)));
        __m256 y = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(c + i)));
        __m256 r;
        if (op == CCB_PROD) r = _mm256_mul_ps(x, y);
        else if (op == CCB_MIN)  /* y where y wins or is NaN, as OP_MIN/OP_MAX */
            r = _mm256_blendv_ps(x, y, _mm256_or_ps(_mm256_cmp_ps(y, x, _CMP_LT_OQ),
                                                    _mm256_cmp_ps(y, y, _CMP_UNORD_Q)));
        else if (op == CCB_MAX)
            r = _mm256_blendv_ps(x, y, _mm256_or_ps(_mm256_cmp_ps(y, x, _CMP_GT_OQ),
                                                    _mm256_cmp_ps(y, y, _CMP_UNORD_Q)));
        else r = _mm256_add_ps(x, y);
        _mm_storeu_si128((__m128i *)(o + i), _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT));
    }
    return i;
}

static size_t fp16_fast(const void *b, const void *c, void *out, size_t n, ccb_op op) {
    if (!__builtin_cpu_supports("f16c") || !__builtin_cpu_supports("avx")) return 0;
    return f16c_loop(b, c, out, n, op);
}
#else
static size_t fp16_fast(const void *b, const void *c, void *out, size_t n, ccb_op op) {
    (void)b; (void)c; (void)out; (void)n; (void)op;
    return 0;
}
#endif

int ccb_reduce3(const void *b, const void *c, void *out, size_t n, ccb_dtype t, ccb_op op) {
    if (t == CCB_FLOAT16 && op >= 0 && op < CCB_NOPS) {
        size_t done = fp16_fast(b, c, out, n, op);  /* the rest below, one at a time */
        b = (const uint16_t *)b + done;
        c = (const uint16_t *)c + done;
        out = (uint16_t *)out + done;
        n -= done;
    }
    switch (t) {
    case CCB_UINT8: INTEGER(uint8_t, unsigned); break;
    case CCB_INT8: INTEGER(int8_t, unsigned); break;
    case CCB_UINT16: INTEGER(uint16_t, unsigned); break;
    case CCB_INT16: INTEGER(int16_t, unsigned); break;
    case CCB_UINT32: INTEGER(uint32_t, uint32_t); break;
    case CCB_INT32: INTEGER(int32_t, uint32_t); break;
    case CCB_INT64: INTEGER(int64_t, uint64_t); break;
    case CCB_UINT64: INTEGER(uint64_t, uint64_t); break;
    case CCB_FLOAT32: DISPATCH_OP(LOOP, float); break;
    case CCB_FLOAT64: DISPATCH_OP(LOOP, double); break;
    case CCB_FLOAT16: DISPATCH_OP(NARROW, uint16_t, f16_to_f32, f32_to_f16); break;
    case CCB_BFLOAT16: DISPATCH_OP(NARROW, uint16_t, bf16_to_f32, f32_to_bf16); break;
    case CCB_FLOAT8E4M3: DISPATCH_OP(NARROW, uint8_t, e4m3_to_f32, f32_to_e4m3); break;
    case CCB_FLOAT8E5M2: DISPATCH_OP(NARROW, uint8_t, e5m2_to_f32, f32_to_e5m2); break;
    default: return CCB_ERR_UNSUPPORTED;
    }
    return CCB_OK;
}

int ccb_reduce_local(const void *in, void *inout, size_t n, ccb_dtype t, ccb_op op) {
    return ccb_reduce3(inout, in, inout, n, t, op);
}

/* avg = sum / p: integers truncate toward zero (C division, as NCCL's
 * SumPostDiv), in a 64-bit type so that p never overflows T. */
#define SCALE_INT(T, W)                                                         \
    do { T *x = (T *)buf; for (size_t i = 0; i < n; i++) x[i] = (T)((W)x[i] / (W)nranks); } while (0)
#define SCALE_FLOAT(T)                                                          \
    do { T *x = (T *)buf; for (size_t i = 0; i < n; i++) x[i] = x[i] / (T)nranks; } while (0)
#define SCALE_NARROW(T, TO, FROM)                                               \
    do { T *x = (T *)buf;                                                       \
         for (size_t i = 0; i < n; i++) x[i] = FROM(TO(x[i]) / (float)nranks); } while (0)

int ccb_finish_avg(void *buf, size_t n, ccb_dtype t, ccb_op op, int nranks) {
    if (op != CCB_AVG) return CCB_OK;
    switch (t) {
    case CCB_UINT8: SCALE_INT(uint8_t, uint64_t); break;
    case CCB_INT8: SCALE_INT(int8_t, int64_t); break;
    case CCB_UINT16: SCALE_INT(uint16_t, uint64_t); break;
    case CCB_INT16: SCALE_INT(int16_t, int64_t); break;
    case CCB_UINT32: SCALE_INT(uint32_t, uint64_t); break;
    case CCB_INT32: SCALE_INT(int32_t, int64_t); break;
    case CCB_INT64: SCALE_INT(int64_t, int64_t); break;
    case CCB_UINT64: SCALE_INT(uint64_t, uint64_t); break;
    case CCB_FLOAT32: SCALE_FLOAT(float); break;
    case CCB_FLOAT64: SCALE_FLOAT(double); break;
    case CCB_FLOAT16: SCALE_NARROW(uint16_t, f16_to_f32, f32_to_f16); break;
    case CCB_BFLOAT16: SCALE_NARROW(uint16_t, bf16_to_f32, f32_to_bf16); break;
    case CCB_FLOAT8E4M3: SCALE_NARROW(uint8_t, e4m3_to_f32, f32_to_e4m3); break;
    case CCB_FLOAT8E5M2: SCALE_NARROW(uint8_t, e5m2_to_f32, f32_to_e5m2); break;
    default: return CCB_ERR_UNSUPPORTED;
    }
    return CCB_OK;
}
