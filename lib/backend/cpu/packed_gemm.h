#ifndef LLM42_BACKEND_CPU_PACKED_GEMM_H_
#define LLM42_BACKEND_CPU_PACKED_GEMM_H_

#include <cstdint>
#include <vector>

#include "lib/util/aligned_vector.h"
#include "lib/util/ggml_types.h"

namespace llm42::internal {

// A register-blocked GEMM for many activation rows (prefill, verify): weight rows are packed
// into panels of eight consecutive K values per row, and a tile of activation rows updates one
// 8-lane accumulator per (weight row, activation row) with a fused multiply-add per step of
// eight K values. AVX-512: two weight rows per register (row c in lanes 0-7, c + 1 in lanes
// 8-15), eight activation values broadcast to both halves, 6 x 4 registers per tile; AVX2: one
// weight row per register, 3 activation rows x 4 weight rows per tile.
//
// Every (weight row, activation row) pair thus runs the fixed family's arithmetic of row_dot.h
// exactly: one 8-lane accumulator updated by a fused multiply-add per 8-element step, the
// reduction tree ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)), then a fused multiply-add per tail
// element. Its bits are those of the AVX2 and portable fixed kernels, whatever the number of
// rows and whichever vector unit, so both schedules may use it.
//
// Types: f32, f16 and bf16 (their conversion to f32 is exact), and q8_0 and q4_0 as their exact
// f32 values (scale x integer) for the fast schedule's prefill: the fixed schedule's quantized
// arithmetic is int8_dot.h's, and DirectGemm takes float types only.

// True when the CPU has AVX2 with FMA and F16C (AVX-512 F, DQ and VL are used where present),
// neither LLM42_CPU_SIMD nor LLM42_CPU_PACKED is off, and allow_simd.
bool PackedGemmAvailable(bool allow_simd = true);
bool PackedGemmSupports(GgmlType type);

// y[rows[i] * ldy + r] = dot(weight row r, x + rows[i] * k) for r in [r0, r1) and every i < n_rows.
// Weight row r starts at w + r * row_bytes in `type`'s layout. `panel` is the caller's scratch
// (one per thread).
void PackedGemm(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, const float* x,
                int64_t k, const int64_t* rows, int64_t n_rows, float* y, int64_t ldy, AlignedVector<float>& panel);

// PackedGemm's arithmetic (the same bits) for a few activation rows (decode of several
// sequences, short verify windows), reading the weight rows directly and converting them in
// registers: packing is not paid back over so few rows. Needs PackedGemmAvailable().
void DirectGemm(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, const float* x,
                int64_t k, const int64_t* rows, int64_t n_rows, float* y, int64_t ldy);

}  // namespace llm42::internal

#endif  // LLM42_BACKEND_CPU_PACKED_GEMM_H_
