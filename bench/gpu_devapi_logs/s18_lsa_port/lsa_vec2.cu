// EXPERIMENT: lsa_vec.cu's kernel, its entries without __launch_bounds__.
#include "lsa_vec.cu"

extern "C" __global__ void lsa_vec2_fp32(const DArgs a) { lsa_vec<Fp32>(a); }
extern "C" __global__ void lsa_vec2_fp16(const DArgs a) { lsa_vec<Fp16>(a); }
extern "C" __global__ void lsa_vec2_bf16(const DArgs a) { lsa_vec<Bf16>(a); }
