#include "lib/backend/cpu/sum_squares.h"

#include "lib/backend/cpu/row_dot.h"
#include "lib/backend/cpu/simd_targets.h"

namespace llm42::internal {
namespace {

double SumSquaresRow(const float* x, int64_t n) {
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += static_cast<double>(x[j] * x[j]);
  return sum;
}

#if LLM42_X86
// Rows r0 .. r0 + 7: two groups of four rows, each a register of four f64 sums (independent
// chains); four columns at a time, transposed so that a register holds one column of four rows.
LLM42_AVX2 void SumSquares8(const float* x, int64_t n, double* sums) {
  __m256d acc[2] = {_mm256_setzero_pd(), _mm256_setzero_pd()};
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
#pragma GCC unroll 2
    for (int g = 0; g < 2; ++g) {
      __m128 c0 = _mm_loadu_ps(x + (4 * g) * n + j), c1 = _mm_loadu_ps(x + (4 * g + 1) * n + j);
      __m128 c2 = _mm_loadu_ps(x + (4 * g + 2) * n + j), c3 = _mm_loadu_ps(x + (4 * g + 3) * n + j);
      _MM_TRANSPOSE4_PS(c0, c1, c2, c3);  // c_q: column j + q of the four rows
      acc[g] = _mm256_add_pd(acc[g], _mm256_cvtps_pd(_mm_mul_ps(c0, c0)));
      acc[g] = _mm256_add_pd(acc[g], _mm256_cvtps_pd(_mm_mul_ps(c1, c1)));
      acc[g] = _mm256_add_pd(acc[g], _mm256_cvtps_pd(_mm_mul_ps(c2, c2)));
      acc[g] = _mm256_add_pd(acc[g], _mm256_cvtps_pd(_mm_mul_ps(c3, c3)));
    }
  }
  _mm256_storeu_pd(sums, acc[0]);
  _mm256_storeu_pd(sums + 4, acc[1]);
  for (int r = 0; r < 8; ++r) {  // the columns past the last four, in order
    const float* xr = x + r * n;
    for (int64_t t = j; t < n; ++t) sums[r] += static_cast<double>(xr[t] * xr[t]);
  }
}
#endif  // LLM42_X86

}  // namespace

void SumSquares(const float* x, int64_t n, int64_t rows, double* sums, bool allow_simd) {
  int64_t i = 0;
#if LLM42_X86
  if (allow_simd && CpuHasAvx2()) {
    for (; i + 8 <= rows; i += 8) SumSquares8(x + i * n, n, sums + i);
  }
#endif
  for (; i < rows; ++i) sums[i] = SumSquaresRow(x + i * n, n);
}

}  // namespace llm42::internal
