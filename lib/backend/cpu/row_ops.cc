#include "lib/backend/cpu/row_ops.h"

#include "lib/backend/cpu/row_dot.h"
#include "lib/backend/cpu/simd_targets.h"

namespace llm42::internal {
namespace {

#if LLM42_X86
// The lanes of the sixteen from j that are below n (all of them but in the last step).
inline __mmask16 Lanes(int64_t left) { return left >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << left) - 1); }

LLM42_AVX512 void ScaleByWeights512(const float* x, float scale, const float* w, int64_t n, float* y) {
  const __m512 s = _mm512_set1_ps(scale);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = Lanes(n - j);
    const __m512 v = _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + j), s), _mm512_maskz_loadu_ps(m, w + j));
    _mm512_mask_storeu_ps(y + j, m, v);
  }
}

LLM42_AVX512 void AddInPlace512(float* y, const float* x, int64_t n) {
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = Lanes(n - j);
    _mm512_mask_storeu_ps(y + j, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, y + j), _mm512_maskz_loadu_ps(m, x + j)));
  }
}

LLM42_AVX512 void SwiGluFinish512(const float* gate, const float* up, const float* e, int64_t n, float* out) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t j = 0; j < n; j += 16) {
    // Masked-off lanes divide zero by one: nothing raised, nothing stored.
    const __mmask16 m = Lanes(n - j);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + j);
    const __m512 d = _mm512_add_ps(one, _mm512_maskz_loadu_ps(m, e + j));
    _mm512_mask_storeu_ps(out + j, m, _mm512_mul_ps(_mm512_div_ps(g, d), _mm512_maskz_loadu_ps(m, up + j)));
  }
}

LLM42_AVX512 void Negate512(const float* x, int64_t n, float* y) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = Lanes(n - j);
    _mm512_mask_storeu_ps(y + j, m, _mm512_xor_ps(_mm512_maskz_loadu_ps(m, x + j), sign));
  }
}
#endif  // LLM42_X86

bool Simd(bool allow_simd) {
#if LLM42_X86
  return allow_simd && CpuHasAvx512();
#else
  (void)allow_simd;
  return false;
#endif
}

}  // namespace

void ScaleByWeights(const float* x, float scale, const float* w, int64_t n, float* y, bool allow_simd) {
#if LLM42_X86
  if (Simd(allow_simd)) return ScaleByWeights512(x, scale, w, n, y);
#endif
  for (int64_t j = 0; j < n; ++j) y[j] = x[j] * scale * w[j];
}

void AddInPlace(float* y, const float* x, int64_t n, bool allow_simd) {
#if LLM42_X86
  if (Simd(allow_simd)) return AddInPlace512(y, x, n);
#endif
  for (int64_t j = 0; j < n; ++j) y[j] += x[j];
}

void SwiGluFinish(const float* gate, const float* up, const float* e, int64_t n, float* out, bool allow_simd) {
#if LLM42_X86
  if (Simd(allow_simd)) return SwiGluFinish512(gate, up, e, n, out);
#endif
  for (int64_t j = 0; j < n; ++j) out[j] = gate[j] / (1.0f + e[j]) * up[j];
}

void Negate(const float* x, int64_t n, float* y, bool allow_simd) {
#if LLM42_X86
  if (Simd(allow_simd)) return Negate512(x, n, y);
#endif
  for (int64_t j = 0; j < n; ++j) y[j] = -x[j];
}

}  // namespace llm42::internal
