#include "lib/backend/cpu/int8_dot.h"

#include <cmath>

#include "lib/backend/cpu/fixed_tree.h"
#include "lib/backend/cpu/weight_loaders.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define LLM42_X86 1
#endif

namespace llm42::internal {

void QuantizeActivations(const float* x, int64_t k, ActivationBlockQ8* out) {
  for (int64_t b = 0; b < k / 32; ++b) {
    const float* xb = x + 32 * b;
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(xb[i]));
    const float d = amax / 127.0f;
    const float inv = d > 0 ? 1.0f / d : 0.0f;
    out[b].d = d;
    for (int i = 0; i < 32; ++i) out[b].q[i] = static_cast<int8_t>(std::lround(xb[i] * inv));
  }
}

namespace {

// The fixed family's definition (int8_dot.h), lane by lane.
template <typename QL>
float PortableFixedInt8Dot(const uint8_t* w, const ActivationBlockQ8* x, int64_t k) {
  float acc[2][8] = {};
  for (int64_t b = 0; b < k / 32; ++b) {
    const float s = QL::Scale(w, b) * x[b].d;
    for (int l = 0; l < 8; ++l) {
      int32_t p = 0;
      for (int i = 4 * l; i < 4 * l + 4; ++i) p += static_cast<int32_t>(QL::Q(w, 32 * b + i)) * x[b].q[i];
      acc[b % 2][l] = std::fma(static_cast<float>(p), s, acc[b % 2][l]);
    }
  }
  float v[8], h[4];
  for (int l = 0; l < 8; ++l) v[l] = acc[0][l] + acc[1][l];
  for (int l = 0; l < 4; ++l) h[l] = v[l] + v[l + 4];
  return (h[0] + h[2]) + (h[1] + h[3]);
}

template <typename QL, int NW, int NX>
void PortableFixedInt8Tile(const uint8_t* const* w, const ActivationBlockQ8* const* x, int64_t k, float* out) {
  for (int r = 0; r < NW; ++r) {
    for (int j = 0; j < NX; ++j) out[r * NX + j] = PortableFixedInt8Dot<QL>(w[r], x[j], k);
  }
}

template <typename QL>
Int8Kernels PortableFixedKernels() {
  return {PortableFixedInt8Tile<QL, 1, 1>, PortableFixedInt8Tile<QL, 1, 4>};
}

#if LLM42_X86
// The 32 integer weights of a block (byte i = element i).
struct Q8_0Weights {
  using Block = BlockQ8_0;
  LLM42_AVX2 static __m256i Load(const Block& b) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.q)); }
};
// ggml's q4_0 layout: element j < 16 is the low nibble of q[j], j >= 16 the high nibble of
// q[j - 16]; weight = nibble - 8.
struct Q4_0Weights {
  using Block = BlockQ4_0;
  LLM42_AVX2 static __m256i Load(const Block& b) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.q));
    const __m128i mask = _mm_set1_epi8(0x0F);
    const __m128i lo = _mm_and_si128(bytes, mask), hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), mask);
    return _mm256_sub_epi8(_mm256_set_m128i(hi, lo), _mm256_set1_epi8(8));
  }
};

// Block b of NW weight rows against NX activation rows, into accumulator a of each pair. Lane l
// of the integer products is elements 4l..4l+3: maddubs multiplies |w| (unsigned, <= 128) by x
// with w's sign moved onto it (|x| <= 127) and sums adjacent pairs (at most 32512: no
// saturation), madd sums adjacent pairs of those. Exact, so any CPU's lanes agree.
template <typename W, int NW, int NX, int NACC>
LLM42_AVX2 inline void Int8Accumulate(const typename W::Block* const* w, const ActivationBlockQ8* const* x,
                                      int64_t b, int a, __m256 (&acc)[NW][NX][NACC]) {
  __m256i xq[NX];
#pragma GCC unroll 4
  for (int j = 0; j < NX; ++j) xq[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[j][b].q));
#pragma GCC unroll 4
  for (int r = 0; r < NW; ++r) {
    const __m256i wq = W::Load(w[r][b]);
    const __m256i aw = _mm256_sign_epi8(wq, wq);
    const float dw = _cvtsh_ss(w[r][b].scale);
#pragma GCC unroll 4
    for (int j = 0; j < NX; ++j) {
      const __m256i pairs = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(xq[j], wq));
      const __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
      acc[r][j][a] = _mm256_fmadd_ps(p, _mm256_set1_ps(dw * x[j][b].d), acc[r][j][a]);
    }
  }
}

// NACC accumulators per pair over blocks b mod NACC, added in order, then the fixed tree. NACC =
// 2 is the fixed family's definition.
template <typename W, int NW, int NX, int NACC>
LLM42_AVX2 void Int8Tile(const uint8_t* const* w_rows, const ActivationBlockQ8* const* x, int64_t k, float* out) {
  const typename W::Block* w[NW];
  for (int r = 0; r < NW; ++r) w[r] = reinterpret_cast<const typename W::Block*>(w_rows[r]);
  __m256 acc[NW][NX][NACC];
  for (int r = 0; r < NW; ++r) {
    for (int j = 0; j < NX; ++j) {
      for (int a = 0; a < NACC; ++a) acc[r][j][a] = _mm256_setzero_ps();
    }
  }
  const int64_t n = k / 32;
  int64_t b = 0;
  for (; b + NACC <= n; b += NACC) {
#pragma GCC unroll 4
    for (int a = 0; a < NACC; ++a) Int8Accumulate<W, NW, NX, NACC>(w, x, b + a, a, acc);
  }
#pragma GCC unroll 4
  for (int a = 0; a < NACC; ++a) {
    if (b + a < n) Int8Accumulate<W, NW, NX, NACC>(w, x, b + a, a, acc);
  }
  for (int r = 0; r < NW; ++r) {
    for (int j = 0; j < NX; ++j) {
      __m256 v = acc[r][j][0];
      for (int a = 1; a < NACC; ++a) v = _mm256_add_ps(v, acc[r][j][a]);
      out[r * NX + j] = FixedTreeSum(v);
    }
  }
}

template <typename W>
Int8Kernels Avx2Kernels(DotFamily family) {
  if (family == DotFamily::kFixed) return {Int8Tile<W, 1, 1, 2>, Int8Tile<W, 1, 4, 2>};
  return {Int8Tile<W, 1, 1, 4>, Int8Tile<W, 1, 4, 2>};
}
#endif  // LLM42_X86

}  // namespace

Int8Kernels SelectInt8Kernels(GgmlType type, DotFamily family, bool allow_simd) {
  if (!IsInt8Type(type)) return {};
#if LLM42_X86
  if (allow_simd && CpuHasAvx2()) {
    return type == GgmlType::kQ8_0 ? Avx2Kernels<Q8_0Weights>(family) : Avx2Kernels<Q4_0Weights>(family);
  }
#endif
  (void)allow_simd;
  if (family == DotFamily::kFast) return {};
  return type == GgmlType::kQ8_0 ? PortableFixedKernels<Q8_0Loader>() : PortableFixedKernels<Q4_0Loader>();
}

}  // namespace llm42::internal
