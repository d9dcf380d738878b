#ifndef LLM42_BACKEND_CPU_INT8_GEMM_H_
#define LLM42_BACKEND_CPU_INT8_GEMM_H_

#include <cstdint>

#include "lib/backend/cpu/int8_dot.h"
#include "lib/util/aligned_vector.h"
#include "lib/util/ggml_types.h"

namespace llm42::internal {

// The fast schedule's prompt GEMM for q8_0 and q4_0 weights on AVX-512 VNNI: weight rows packed
// 16 to a panel, interleaved so that one 512-bit register holds the same four values of one block
// of 16 rows; dpbusd against an activation's four values broadcast from memory adds them into 16
// lanes, one per weight row, so eight dpbusd give 16 whole-block integer products (exact in
// int32), and a block costs one conversion, multiply and fused multiply-add per 16 outputs.
// int8_dot.h's tiles keep the fixed family's eight partial sums per block, each converted and
// multiplied on its own: three times the float work per product.
//
// Arithmetic (the fast family's own bits): for weight row r and activation row j,
// y = sum over blocks b in order of f32(p_b) * (f32(weight scale_b) * d_b), p_b the block's exact
// integer dot product, one f32 accumulator per output. The same for every row of a batch, but not
// the fixed family's definition (int8_dot.h), which the fixed schedule keeps with its own tiles:
// this layout computing that definition (a register per lane of the definition, 16 outputs each)
// ran no faster than they do (same dpbusd count; float work 48 -> 34 operations per 1024
// products; llama-110m GEMMs alone, alternated on a Zen 5: 233-395 against 258-396 GFLOP/s).

// True where the CPU has AVX-512 VNNI (and LLM42_CPU_SIMD is not off) and allow_simd.
bool Int8GemmAvailable(bool allow_simd = true);

// From how many activation rows the backend gives a fast MatMul to Int8Gemm rather than
// int8_dot.h's tiles (llama-110m q8_0, two threads, GEMMs alone on a Zen 5, alternated: 8 rows
// 95-138 against 137-152 GFLOP/s, 16 rows 205-243 against 199-266, 32 rows 285-404 against
// 288-302, 64 rows 496-555 against 320-329).
inline constexpr int64_t kInt8GemmMinRows = 32;

// The whole-block biases Int8Gemm adds (int8_dot.h's eight lane biases of each block, summed) of
// one activation row of k values: out[b] for block b. Once per row and MatMul, for every matrix
// and thread.
void Int8GemmBiases(const ActivationPairQ8* row, int64_t k, int32_t* out);

// y[rows[i] * ldy + r] = dot(weight row r, activation row rows[i]) for r in [r0, r1) and every
// i < n_rows; weight row r at w + r * row_bytes in `type`'s layout (q8_0 or q4_0, k a multiple
// of 32); activation row a's records (QuantizeActivations for `type`) at act + a * ActivationPairs(k),
// its Int8GemmBiases at biases + a * (k / 32). `panel` is the caller's scratch (one per thread).
// Needs Int8GemmAvailable().
void Int8Gemm(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1,
              const ActivationPairQ8* act, const int32_t* biases, int64_t k, const int64_t* rows, int64_t n_rows,
              float* y, int64_t ldy, AlignedVector<uint8_t>& panel);

}  // namespace llm42::internal

#endif  // LLM42_BACKEND_CPU_INT8_GEMM_H_
