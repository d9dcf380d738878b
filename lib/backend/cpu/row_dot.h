#ifndef LLM42_BACKEND_CPU_ROW_DOT_H_
#define LLM42_BACKEND_CPU_ROW_DOT_H_

#include <cstdint>

#include "lib/model/ggml_types.h"

namespace llm42::internal {

// Dot products of one weight row (in its storage type) with up to kMaxRowDotX activation rows
// at once, so the row is loaded and converted once for all of them.
inline constexpr int kMaxRowDotX = 4;
using RowDotFn = void (*)(const uint8_t* w_row, const float* const* x, int n_x, int64_t k,
                          float* out);

// The kernel for `type` on this CPU: AVX2/FMA/F16C when the processor has them, else portable.
// nullptr for types without kernels.
RowDotFn SelectRowDot(GgmlType type, bool allow_simd = true);

// Converts the first n weights of a row to f32 (embedding lookups).
void DequantizeRow(GgmlType type, const uint8_t* row, int64_t n, float* out);

// True when the AVX2/FMA/F16C path is usable on this machine.
bool CpuHasAvx2();

// Portable and AVX2 implementations, exposed for the kernel tests.
RowDotFn PortableRowDot(GgmlType type);
RowDotFn Avx2RowDot(GgmlType type);

}  // namespace llm42::internal

#endif  // LLM42_BACKEND_CPU_ROW_DOT_H_
