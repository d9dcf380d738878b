#ifndef LLM42_BACKEND_CPU_FORMAT_GEMV_H_
#define LLM42_BACKEND_CPU_FORMAT_GEMV_H_

#include "lib/backend/cpu/row_dot.h"
#include "lib/util/ggml_types.h"

namespace llm42::internal {

// The decode GEMVs of quant_formats.h's block types on AVX2: R weight rows at a time against one
// activation row, each sub-block's scale and offset decoded once (Format::Scale) and its weights
// eight at a time (Format::Q8), which the eight-element loaders (FormatVec::Load8, made for the
// packed GEMM's panels) decode again for every eight weights: single-row decode of llama-110m q4_k
// ran at 32 tok/s through them (q4_0's int8 kernels: 630).
// Where the CPU has AVX-512, two rows share a 512-bit register (one conversion, multiply and fused
// multiply-add per 16 weights; llama-110m decode, two threads, on a Zen 4: q4_k 163 -> 186 tok/s,
// q6_k 105 -> 114, llama.cpp's Q4_K_M file 130 -> 148), each row's lanes the same chain.
// Both families: one chain of eight lanes per row, a fused multiply-add per eight-element step,
// then row_dot.h's tree: the fixed family's arithmetic on the weights' exact values, so the bits
// of every other fixed kernel (fast decode rows of these types are their replay's bits, but for
// Q4_K, Q5_K, Q6_K and IQ4_XS on AVX-512 VNNI, which fast decodes with kquant_gemv.h). The
// kernels template on U chains per row for a fast variant of its own; none measured faster. fn
// nullptr for other types and without AVX2.
WideGemv SelectFormatGemv(GgmlType type, DotFamily family, bool allow_simd = true);

}  // namespace llm42::internal

#endif  // LLM42_BACKEND_CPU_FORMAT_GEMV_H_
