#ifndef LLM42_BACKEND_CPU_ROUND_ROW_H_
#define LLM42_BACKEND_CPU_ROUND_ROW_H_

#include <cstdint>

namespace llm42::internal {

// n f32 values rounded to f16 or bf16, the scalar conversions' bits (ggml_types.h's Fp32ToFp16
// and Fp32ToBf16: round to nearest even, overflow to infinity, a NaN to the quiet NaN of its sign
// with no other payload (f16) or its high half with the quiet bit set (bf16)), eight at a time
// on AVX2 (F16C's conversion, NaNs made canonical first; the bf16 rounding in integer lanes) where
// the CPU has it and allow_simd: the KV cache's stores (a prompt of 512 tokens on llama-110m
// rounds 9.4 million values, which the scalar conversions took 6 % of a pp512 to do).
// dst: 2 n bytes, value i at dst + 2 i (any alignment).
void RoundRowToF16(const float* src, int64_t n, uint8_t* dst, bool allow_simd = true);
void RoundRowToBf16(const float* src, int64_t n, uint8_t* dst, bool allow_simd = true);

}  // namespace llm42::internal

#endif  // LLM42_BACKEND_CPU_ROUND_ROW_H_
