#ifndef LLM42_BACKEND_CPU_ROW_DOT_H_
#define LLM42_BACKEND_CPU_ROW_DOT_H_

#include <cstddef>
#include <cstdint>

#include "lib/util/ggml_types.h"

namespace llm42::internal {

// Dot products of one weight row (in its storage type) with up to kMaxRowDotX activation rows
// at once, so the row is loaded and converted once for all of them.
//
// Two families:
// - fast: one row alone uses 4 accumulators of 8 lanes; rows in groups use 2 each (less
//   register pressure, more rows per weight load). A row's bits therefore depend on how many
//   rows it was grouped with, that is, on the batch.
// - fixed: every (weight row, activation row) pair, however the rows are grouped, runs the same
//   arithmetic: one accumulator of 8 lanes updated by a fused multiply-add per 8-element step,
//   the reduction tree ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)), then a fused multiply-add per
//   tail element. The portable version emulates exactly that with PortableFmaf, so fixed results
//   are the same bits with or without AVX2, and the 2x4 tile and the 4-row GEMV may serve it.
// Quantized rows (q8_0, q4_0) have their fixed arithmetic defined in int8_dot.h (integer dot
// products against 8-bit activations): SelectRowDot returns no fixed kernel for them, and their
// fast kernels here are the fallback of CPUs without AVX2. The other block types (q4_1 ... q6_k,
// iq4_nl, iq4_xs: quant_formats.h) run these kernels, both families, on their exact f32 values.
inline constexpr int kMaxRowDotX = 4;
inline constexpr int kMaxFixedRowDotX = 4;
using RowDotFn = void (*)(const uint8_t* w_row, const float* const* x, int n_x, int64_t k,
                          float* out);

enum class DotFamily { kFast, kFixed };

// The kernel for `type` on this CPU: AVX2/FMA/F16C when the processor has them and allow_simd,
// else portable. nullptr for types without kernels.
RowDotFn SelectRowDot(GgmlType type, DotFamily family, bool allow_simd = true);

// Two weight rows against four activation rows at once (8 independent accumulators, enough to
// keep both FMA pipes busy), out[j * 2 + r], with the fixed family's per-pair arithmetic (so
// both families use it). nullptr where there is no such kernel.
using TileDotFn = void (*)(const uint8_t* w_row0, const uint8_t* w_row1, const float* const* x,
                           int64_t k, float* out);
TileDotFn SelectTileDot(GgmlType type, bool allow_simd = true);

// GEMVs over consecutive weight rows against one activation row (decode): out[r] = dot(weight
// row r, x) for n_rows rows, row r at w + r * row_bytes, n_rows a multiple of the kernel's group
// of rows (`rows`). One call for all of a thread's rows: the kernels loop over them with the row
// body inlined (a call per row cost ~6 ns of a 768-element q4_0 row's ~40 on a Zen 3).
using GemvFn = void (*)(const uint8_t* w, size_t row_bytes, int64_t n_rows, const float* x, int64_t k, float* out);
struct WideGemv {
  GemvFn fn = nullptr;
  int rows = 0;
};
// fixed: four weight rows at a time. fn nullptr where there is none.
WideGemv SelectFixedGemv4(GgmlType type, bool allow_simd = true);
// The decode GEMV for f32, f16 and bf16 rows of row_bytes (0: unknown, taken as short): fast's
// rows of kStreamPrefetchBytes or more on AVX-512 in 16-lane accumulators (f32 eight rows at a
// time, f16 and bf16 one); SelectFixedGemv4 for other such rows (both families) and, where the
// CPU has AVX-512, for every fixed row; other rows one at a time (fixed one 8-lane chain, fast
// two). fn nullptr where the CPU lacks AVX2. The 256-bit kernels read ahead of their rows with a
// software prefetch (weight_loaders.h's kStreamPrefetchBytes).
WideGemv SelectWideGemv(GgmlType type, DotFamily family, bool allow_simd = true, int64_t row_bytes = 0);
// The decode GEMVs' share of rows: guided chunks come in multiples of this many (every
// WideGemv's rows divide it).
inline constexpr int kWideGemvRows = 16;

// Converts the first n weights of a row to f32, the values every kernel computes with (embedding
// lookups, a GPU's conversion at load); false, and zeros, for a type without an element loader.
bool DequantizeRow(GgmlType type, const uint8_t* row, int64_t n, float* out);

// True when the AVX2/FMA/F16C path is usable on this machine and not turned off with the
// environment variable LLM42_CPU_SIMD=off.
bool CpuHasAvx2();
// CpuHasAvx2() and AVX-512 F, DQ and VL (and LLM42_CPU_SIMD not avx2): the 512-bit float
// kernels (packed GEMM, wide GEMV, attention).
bool CpuHasAvx512();
// CpuHasAvx512() and AVX-512 BW and VNNI: the 512-bit int8 kernels and activation quantization.
bool CpuHasVnni512();
// CpuHasAvx512() and AVX-512 BW and BF16: bf16 dot products (bf16_gemm.h).
bool CpuHasBf16Dot512();

}  // namespace llm42::internal

#endif  // LLM42_BACKEND_CPU_ROW_DOT_H_
