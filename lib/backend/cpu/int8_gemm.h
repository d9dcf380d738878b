#ifndef LLM42_BACKEND_CPU_INT8_GEMM_H_
#define LLM42_BACKEND_CPU_INT8_GEMM_H_

#include <cstdint>

#include "lib/backend/cpu/int8_dot.h"
#include "lib/util/aligned_vector.h"
#include "lib/util/ggml_types.h"

namespace llm42::internal {

// The prompt GEMM for q8_0 and q4_0 weights on AVX-512 VNNI, both schedules: weight rows packed
// 16 to a panel, interleaved so that one 512-bit register holds the same four values of one block
// of 16 rows; dpbusd against an activation's four values broadcast from memory adds them into 16
// lanes, one per weight row, so eight dpbusd give 16 whole-block integer products (exact in
// int32), and a block costs one conversion, multiply and fused multiply-add per 16 outputs.
//
// Arithmetic: for fixed, the family's definition (int8_dot.h: whole-block products, eight chains
// over blocks b mod 8, the tree), computed a chain at a time, so its bits are every fixed kernel's;
// for fast, one chain over the blocks in order (its own bits, the same for every row of a batch;
// the eight chains' stores and tree cost 10 % of the GEMMs at k = 768, alternated on a Zen 5: fast
// q4_0 alone 706-909 GFLOP/s with one chain, 751-810 with eight).
// Version 2 of that definition (eight partial sums per block, each converted and multiplied on
// its own) ran no faster in this layout than int8_dot.h's tiles (same dpbusd count; llama-110m
// GEMMs alone, alternated on a Zen 5: 233-395 against 258-396 GFLOP/s), while whole-block
// products reached 700-890: the reason for version 3.

// True where the CPU has AVX-512 VNNI (and LLM42_CPU_SIMD is not off) and allow_simd.
bool Int8GemmAvailable(bool allow_simd = true);

// How the backend splits a schedule's activation rows of a quantized MatMul on AVX-512 VNNI
// (both give the fixed family's bits, and fast's Int8Gemm its own): from kInt8GemmMinRows rows
// Int8Gemm (weight panels), from kFewRowsMin Int8GemmFewRows (activation panels), fewer
// int8_dot.h's row kernels. Single thread, q8_0 and q4_0 at k = 768 and 2048, fixed, GFLOP/s:
// rows       4        6        8        16       32       128      256      512
// row kern.  141-145  121-124  144-148  140-141  89
// few rows   93-101   143-151  190-198  347-374  412-466  444-519  452-489  425-438
// Int8Gemm                              135-145  213-224  429-454  498-507  506-536
// (version 2's row tiles, for comparison: 233-240 at 8 rows.) Two threads, llama-110m q4_0, GEMMs
// alone, alternated, noisy, fixed / fast against version 2: 8 rows 178-196 / 207-219 against
// 182-222 / 253-286; 16 rows 291-418 / 304-426 against 240-253 / 265; 64 rows 386-506 / 453-540
// against 202-287 / 469-501; 128 rows through few rows 438-494 / 473-633 against 277-293 / 629-665
// (fast's Int8Gemm, one chain), hence Int8Gemm from 128.
inline constexpr int64_t kFewRowsMin = 6;
inline constexpr int64_t kInt8GemmMinRows = 128;

// The whole-block biases Int8Gemm adds (int8_dot.h's eight lane biases of each block, summed) of
// one activation row of k values: out[b] for block b. Once per row and MatMul, for every matrix
// and thread.
void Int8GemmBiases(const ActivationPairQ8* row, int64_t k, int32_t* out);

// y[rows[i] * ldy + r] = dot(weight row r, activation row rows[i]) in `family`'s arithmetic, for
// r in [r0, r1) and every i < n_rows; weight row r at w + r * row_bytes in `type`'s layout (q8_0
// or q4_0, k a multiple of 32); activation row a's records (QuantizeActivations for `type`) at
// act + a * ActivationPairs(k), its Int8GemmBiases at biases + a * (k / 32). `panel` is the
// caller's scratch (one per thread). Needs Int8GemmAvailable().
void Int8Gemm(DotFamily family, GgmlType type, const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1,
              const ActivationPairQ8* act, const int32_t* biases, int64_t k, const int64_t* rows, int64_t n_rows,
              float* y, int64_t ldy, AlignedVector<uint8_t>& panel);

// Few activation rows (a verify window, a short prompt): the activation rows packed 16 to a panel
// instead of the weights, the weight rows read as they are. Per block of a panel: group g (0..7)
// holds values 4g..4g+3 of each row (row i at bytes 4i..4i+3), then the rows' 16 whole-block
// biases (Int8GemmBiases) and 16 scales; lanes past the last row are zeros.
inline constexpr int64_t kActivationPanelBlockBytes = 8 * 64 + 64 + 64;
// Bytes of the panels of n_rows activation rows of k values.
int64_t ActivationPanelBytes(int64_t n_rows, int64_t k);
// Activation rows rows[0..n_rows) (records at act + row * ActivationPairs(k), Int8GemmBiases at
// biases + row * (k / 32)) into panels at out (ActivationPanelBytes).
void PackActivationPanels(const ActivationPairQ8* act, const int32_t* biases, int64_t k, const int64_t* rows,
                          int64_t n_rows, uint8_t* out);

// y[rows[i] * ldy + r] = dot(weight row r, activation row rows[i]) for r in [r0, r1) and every
// i < n_rows, in the fixed family's arithmetic, from the panels PackActivationPanels made of
// those rows: per weight row and block, eight dpbusd of the weight's four unsigned-shifted values
// (broadcast) against a panel's groups give 16 rows' whole-block products, one conversion,
// multiply and fused multiply-add per 16 outputs, no sums across lanes (int8_dot.h's row kernels
// need them) and no weight panels (Int8Gemm packs them, which a few rows do not repay). Needs
// Int8GemmAvailable().
void Int8GemmFewRows(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1,
                     const uint8_t* panels, int64_t k, const int64_t* rows, int64_t n_rows, float* y, int64_t ldy);

}  // namespace llm42::internal

#endif  // LLM42_BACKEND_CPU_INT8_GEMM_H_
