#include "lib/backend/cpu/blas_gemm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "lib/backend/cpu/row_dot.h"
#include "lib/backend/cpu/weight_loaders.h"

#if LLM42_HAVE_BLIS
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtype-limits"  // inside blis.h's inline functions
#include <blis.h>                                // bli_arch_query_id
#pragma GCC diagnostic pop
#include <cblas.h>  // BLIS's CBLAS layer
#endif

namespace llm42::internal {
namespace {

#if LLM42_HAVE_BLIS
// Weight rows converted to f32 per BLAS call: each call packs all the activation rows again, so
// a slab must be long enough to pay for that (64 rows: f16 GEMMs alone 93-112 GFLOP/s against
// 110-126 without BLIS); 512 rows of 768-4096 values are 1.5-8 MiB of scratch per thread.
constexpr int64_t kSlabRows = 512;

#if defined(__x86_64__)
template <typename V>
LLM42_AVX2 void ConvertRowsAvx2(const uint8_t* w, size_t row_bytes, int64_t n, int64_t k, float* out) {
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* row = w + static_cast<size_t>(r) * row_bytes;
    float* dst = out + r * k;
    for (int64_t i = 0; i + 8 <= k; i += 8) _mm256_storeu_ps(dst + i, V::Load8(row, i));  // k % 8 == 0 (ConvertRows)
  }
}
#endif

// Rows [0, n) of w as f32, row r at out + r * k: the element loaders' exact values.
void ConvertRows(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t n, int64_t k, float* out) {
#if defined(__x86_64__)
  if (CpuHasAvx2() && k % 8 == 0) {
    if (WithElementLoader(type, [&](auto l) { ConvertRowsAvx2<VecOf<decltype(l)>>(w, row_bytes, n, k, out); })) {
      return;
    }
  }
#endif
  for (int64_t r = 0; r < n; ++r) DequantizeRow(type, w + static_cast<size_t>(r) * row_bytes, k, out + r * k);
}
#endif  // LLM42_HAVE_BLIS

}  // namespace

bool BlasGemmBuilt() {
#if LLM42_HAVE_BLIS
  return true;
#else
  return false;
#endif
}

bool BlasGemmAvailable() {
#if LLM42_HAVE_BLIS
  // LLM42_CPU_BLAS=off keeps the packed GEMM (to measure what BLIS pays, and to compare).
  static const bool on =
      !(std::getenv("LLM42_CPU_BLAS") != nullptr && std::strcmp(std::getenv("LLM42_CPU_BLAS"), "off") == 0);
  // BLIS picks its kernels by CPU; on one it does not know it runs its portable reference ones
  // (Debian's 0.9.0 on a Zen 5: llama-1b f16 fast GEMMs alone at 512 rows, two threads, 76-78
  // GFLOP/s against the packed GEMM's 383-386, pp512 34-37 against 166-168 tok/s).
  static const bool tuned = bli_arch_query_id() != BLIS_ARCH_GENERIC;
  return on && tuned && CpuHasAvx2();
#else
  return false;
#endif
}

bool BlasGemm(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, const float* x, int64_t k,
              const int64_t* rows, int64_t n_rows, float* y, int64_t ldy, AlignedVector<float>& scratch) {
#if LLM42_HAVE_BLIS
  if (n_rows <= 0 || r0 >= r1) return true;
  if (rows[n_rows - 1] - rows[0] != n_rows - 1) return false;  // rows are increasing: consecutive
  const float* xs = x + rows[0] * k;
  float* ys = y + rows[0] * ldy;
  const int m = static_cast<int>(n_rows), kk = static_cast<int>(k), ld = static_cast<int>(ldy);
  if (type == GgmlType::kF32) {
    const auto* rows_f32 = reinterpret_cast<const float*>(w + static_cast<size_t>(r0) * row_bytes);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, static_cast<int>(r1 - r0), kk, 1.0f, xs, kk, rows_f32,
                static_cast<int>(row_bytes / sizeof(float)), 0.0f, ys + r0, ld);
    return true;
  }
  scratch.resize(static_cast<size_t>(kSlabRows * k));
  for (int64_t s = r0; s < r1; s += kSlabRows) {
    const int64_t n = std::min(kSlabRows, r1 - s);
    ConvertRows(type, w + static_cast<size_t>(s) * row_bytes, row_bytes, n, k, scratch.data());
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, static_cast<int>(n), kk, 1.0f, xs, kk, scratch.data(), kk,
                0.0f, ys + s, ld);
  }
  return true;
#else
  (void)type, (void)w, (void)row_bytes, (void)r0, (void)r1, (void)x, (void)k, (void)rows, (void)n_rows, (void)y,
      (void)ldy, (void)scratch;
  return false;
#endif
}

}  // namespace llm42::internal
