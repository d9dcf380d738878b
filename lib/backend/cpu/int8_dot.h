#ifndef LLM42_BACKEND_CPU_INT8_DOT_H_
#define LLM42_BACKEND_CPU_INT8_DOT_H_

#include <cstddef>
#include <cstdint>

#include "lib/backend/cpu/row_dot.h"
#include "lib/util/ggml_types.h"

namespace llm42::internal {

// Quantized weights (q8_0, q4_0) against 8-bit activations, as llama.cpp does it: each
// activation row is quantized once per MatMul to 8 bits per 32-value block (d = max|x| / 127,
// q = x * (1 / d) rounded to nearest, ties away from zero; scalar code, so the same bits on
// every CPU), and a weight block's contribution is an integer dot product times both scales.
// No conversion of weights to f32 and a quarter of the operand bytes; less precise than f32
// activations by the activation rounding (at most d / 2 per value).
//
// Both schedules use it, in two families:
// - fixed, exactly specified (the portable kernel spells it out and every SIMD kernel gives its
//   bits; kFixedScheduleVersion 3): for block b, the integer p_b = sum of weight * activation
//   over its 32 elements (exact in int32) and s_b = f32(weight scale) * activation d (rounded to
//   f32); eight f32 chains over the blocks, C[b mod 8] = fma(f32(p_b), s_b, C[b mod 8]) in block
//   order from +0; then row_dot.h's reduction tree ((C0+C4)+(C2+C6)) + ((C1+C5)+(C3+C7)).
//   Nothing in it depends on how many weight or activation rows a kernel handles at once, so it
//   is row-invariant by construction. Whole-block products let int8_gemm.h's panels (16 weight
//   rows to a register) compute it with one conversion and fused multiply-add per block and 16
//   outputs, and a row-major kernel with one per eight blocks (their products summed across
//   lanes first). Version 2 kept eight 4-element partial sums per block, each converted and
//   fused-multiply-added on its own, in two chains: three times the float work of a prompt, and
//   no panel kernel could do better (int8_gemm.h).
// - fast: the same per-block integer products; prompts, verify rows and full groups of four
//   activation rows get the fixed arithmetic, other rows (decode, leftovers) the fast kernels'
//   own chains, so a row's bits depend on the batch it is in.
// Kernels: AVX2 (maddubs on sign-moved bytes for q8_0, on the nibbles with the bias for q4_0),
// AVX-512 VNNI (dpbusd on unsigned-shifted weights with the activation's bias), portable.
// bias[l] = -offset * (q[4l] + q[4l+1] + q[4l+2] + q[4l+3]), offset the weight type's
// unsigned shift (128 for q8_0, whose kernels add 128 to each weight; 8 for q4_0, whose nibbles
// are weight + 8): VNNI's unsigned-by-signed byte products then sum to the signed ones exactly.
// A quantized row is stored two blocks to a record, blocks 2p and 2p + 1 in record p, each
// field a 512-bit load: a VNNI kernel reads a pair as three plain loads, not six loads and three
// inserts from one record per block (a Zen 5, one thread, k = 768, best of five runs: 4 x 4
// tiles against 512 rows q8_0 169-178 -> 207-214 GFLOP/s, q4_0 158-159 -> 182-189; decode rows
// from L2 q8_0 39-40 -> 61-63 GB/s, q4_0 22 -> 27-30). A row of an odd number of blocks ends in
// a record whose second half is zeros.
struct alignas(64) ActivationPairQ8 {
  int8_t q[64];
  int32_t bias[16];
  float d[16];  // block 2p's d eight times, then block 2p + 1's (a 512-bit register's halves)
};
// Records per row of k values.
inline int64_t ActivationPairs(int64_t k) { return (k / 32 + 1) / 2; }

// Where block b of a row of records lies (Record: ActivationPairQ8, const or not): record b / 2,
// half b % 2; d points at its eight copies.
template <typename Record>
auto ActivationFields(Record* row, int64_t b) {
  Record& p = row[b / 2];
  const int h = static_cast<int>(b % 2);
  struct Fields {
    decltype(&p.q[0]) q;
    decltype(&p.bias[0]) bias;
    decltype(&p.d[0]) d;
  };
  return Fields{p.q + 32 * h, p.bias + 8 * h, p.d + 8 * h};
}

// Block b of a quantized row, as the one-block kernels read it.
struct ActivationBlockQ8 {
  const int8_t* q;
  const int32_t* bias;
  float d;
};
inline ActivationBlockQ8 ActivationBlock(const ActivationPairQ8* row, int64_t b) {
  const auto f = ActivationFields(row, b);
  return {f.q, f.bias, *f.d};
}

// Row x (k a multiple of 32) quantized for weights of `type` (q8_0 or q4_0): the scalar
// definition above, or its AVX-512 or AVX2 form (the same bits: max is exact, the product the
// same rounding, and round-half-away is truncation plus a step where the exact remainder is at
// least a half) where the CPU has AVX-512 VNNI or AVX2 and allow_simd.
void QuantizeActivations(const float* x, int64_t k, GgmlType type, ActivationPairQ8* out, bool allow_simd = true);


inline bool IsInt8Type(GgmlType type) { return type == GgmlType::kQ8_0 || type == GgmlType::kQ4_0; }

// The unsigned shift of `type`'s weights for unsigned-by-signed byte products (the `offset` of the
// biases above): 128 for q8_0, 8 for q4_0 (its nibbles are weight + 8).
inline int32_t ActivationOffset(GgmlType type) { return type == GgmlType::kQ8_0 ? 128 : 8; }

// out[r * NX + j] = dot(weight row w_rows[r], activation row x[j]) over k (whole blocks), for the
// kernel's NW weight rows and NX activation rows.
using Int8TileFn = void (*)(const uint8_t* const* w_rows, const ActivationPairQ8* const* x, int64_t k,
                            float* out);

// out[r] = dot(weight row r, activation row x) for n_rows consecutive weight rows from w (row r at
// w + r * row_bytes): a thread's decode rows in one call. fixed: the `one` kernel's bits (the
// family's definition); fast: its own (q4_0 on AVX2 sums eight blocks at a time).
using Int8GemvFn = void (*)(const uint8_t* w, size_t row_bytes, int64_t n_rows, const ActivationPairQ8* x,
                            int64_t k, float* out);

struct Int8Kernels {
  // 1 weight row x 1 activation row (decode: one row streamed at a time measured faster than
  // four interleaved, 156 against 137 tok/s on llama-110m q8_0)
  Int8TileFn one = nullptr;
  Int8TileFn cols4 = nullptr;  // 1 weight row x 4 activation rows (prefill, verify)
  // tile_w weight rows x tile_x activation rows (prefill, verify), where a kernel has one
  Int8TileFn tile = nullptr;
  int tile_w = 0, tile_x = 0;
  Int8GemvFn gemv = nullptr;  // consecutive weight rows (SIMD kernels; else a call of `one` per row)
};

// The nb blocks of a weight row of `type` (q8_0 or q4_0) as 32 * nb unsigned bytes, element e of
// block b at out[32 * b + e]: weight + ActivationOffset(type), as the VNNI kernels feed dpbusd.
// Needs CpuHasVnni512().
void UnsignedWeights(GgmlType type, const uint8_t* row, int64_t nb, uint8_t* out);

// The kernels of `family` for `type`: AVX2 where the CPU has it (and LLM42_CPU_SIMD is not off)
// and allow_simd; else, for fixed, the portable ones, and for fast none (the caller falls back to
// row_dot.h's fast kernels). None for types other than q8_0 and q4_0.
Int8Kernels SelectInt8Kernels(GgmlType type, DotFamily family, bool allow_simd = true);

}  // namespace llm42::internal

#endif  // LLM42_BACKEND_CPU_INT8_DOT_H_
