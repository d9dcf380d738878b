#ifndef LLM42_BACKEND_CPU_BF16_GEMM_H_
#define LLM42_BACKEND_CPU_BF16_GEMM_H_

#include <cstdint>

#include "lib/util/aligned_vector.h"

namespace llm42::internal {

// The fast schedule's prompt GEMM for bf16 weights on AVX-512 BF16: the activation rows rounded
// to bf16 (to nearest, ties to even) once per MatMul, and vdpbf16ps, which multiplies two bf16
// pairs and adds both products into an f32 lane, against weight rows packed 16 to a panel (a
// 512-bit register holds the same pair of K values of 16 weight rows). Twice the multiply-adds
// per instruction of an f32 fused multiply-add (one thread of a Zen 5: 435 against 237 GFLOP/s in
// a register-only loop), which the f32 GEMM cannot reach whatever its blocking: llama.cpp
// computes its bf16 prompts this way, and this is the only place llm42 rounds activations.
//
// The fast schedule only, and its own bits: the rounding of the activations (a relative error of
// at most 2^-9 per element, as llama.cpp's) and vdpbf16ps's own order and rounding of its two
// products, which is fixed by the instruction, not by the batch: a row's outputs do not depend
// on the other rows (each output is one lane's chain over K in order). The fixed schedule never
// comes here (its bf16 arithmetic is f32 on the exact weights, packed_gemm.h's). A decode step of
// kBf16GemmMinRows or more fast rows comes here too: deterministic requests decoded under `fast`
// then part from `fixed` somewhat more often (the rounded activations), which verification
// catches as rollbacks, never in an output (not measured: the DVR benchmarks run 16 requests).
//
// No portable or AVX2 version: where the CPU has no AVX-512 BF16, bf16 prompts take the f32
// GEMM (packed_gemm.h), as before.

// True where the CPU has AVX-512 BF16 (and LLM42_CPU_SIMD neither off nor avx2) and allow_simd.
bool Bf16GemmAvailable(bool allow_simd = true);

// A MatMul's fast rows of bf16 weights take Bf16Gemm from this many (the packed f32 GEMM's
// threshold; fewer rows run its direct tiles on the exact weights and activations).
inline constexpr int64_t kBf16GemmMinRows = 96;

// K pairs of a row: bf16 activations and packed weights come as 32-bit pairs of consecutive K
// values (element 2p in the low half), an odd K's last pair padded with zero.
inline int64_t Bf16Pairs(int64_t k) { return (k + 1) / 2; }

// Rounds activation rows rows[0..n_rows) of x (k floats each) to bf16 pairs:
// out[rows[i] * Bf16Pairs(k) + p] holds x[rows[i]][2p] (low half) and x[rows[i]][2p + 1] (high).
// Needs Bf16GemmAvailable().
void RoundActivationsToBf16(const float* x, int64_t k, const int64_t* rows, int64_t n_rows, uint32_t* out);

// y[rows[i] * ldy + r] = the bf16 dot product of weight row r (bf16, at w + r * row_bytes) with
// activation row rows[i] (as RoundActivationsToBf16 left it in xb), for r in [r0, r1) and every
// i < n_rows. `panel` is the caller's scratch (one per thread). Needs Bf16GemmAvailable().
void Bf16Gemm(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, const uint32_t* xb, int64_t k,
              const int64_t* rows, int64_t n_rows, float* y, int64_t ldy, AlignedVector<uint32_t>& panel);

}  // namespace llm42::internal

#endif  // LLM42_BACKEND_CPU_BF16_GEMM_H_
