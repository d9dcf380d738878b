#ifndef LLM42_BACKEND_CPU_INT8_DOT_H_
#define LLM42_BACKEND_CPU_INT8_DOT_H_

#include <cstdint>

#include "lib/util/ggml_types.h"

namespace llm42::internal {

// The fast family's decode path for quantized weights, as llama.cpp does it: each activation
// row is quantized once per MatMul to 8 bits per 32-value block (d = max|x| / 127, q = x / d
// rounded to nearest, ties away from zero), and a weight row's dot product is, per block, an
// integer dot product of its 32 integer weights with the 32 q's, times the two scales, summed
// in f32. Faster than converting weights to f32 (no conversion, a quarter of the operand
// bytes), and less precise: the activation rounding (up to d / 2 per value) is the fast
// schedule's to make. `fixed` never uses it.
struct ActivationBlockQ8 {
  float d;
  int8_t q[32];
};

void QuantizeActivations(const float* x, int64_t k, ActivationBlockQ8* out);

// out = dot(weight row, quantized activation row) over k (a whole number of blocks).
using Int8DotFn = float (*)(const uint8_t* w_row, const ActivationBlockQ8* x, int64_t k);

// Two activation rows against one weight row, each block decoded once for both (prefill);
// one accumulator per row, where the one-row kernel alternates two: the bits differ from the
// one-row kernel's, as fast's may.
using Int8Dot2Fn = void (*)(const uint8_t* w_row, const ActivationBlockQ8* x0, const ActivationBlockQ8* x1,
                            int64_t k, float* out);

struct Int8Kernels {
  Int8DotFn one = nullptr;
  Int8Dot2Fn two = nullptr;
};
// q8_0 and q4_0 on CPUs with AVX2 (and LLM42_CPU_SIMD not off) when allow_simd; else none.
Int8Kernels SelectInt8Kernels(GgmlType type, bool allow_simd = true);

}  // namespace llm42::internal

#endif  // LLM42_BACKEND_CPU_INT8_DOT_H_
