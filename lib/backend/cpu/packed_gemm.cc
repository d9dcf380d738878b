#include "lib/backend/cpu/packed_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "lib/backend/cpu/fixed_tree.h"
#include "lib/backend/cpu/row_dot.h"
#include "lib/backend/cpu/simd_targets.h"
#include "lib/backend/cpu/weight_loaders.h"

#if defined(__x86_64__)
#define LLM42_X86 1
#endif

namespace llm42::internal {
namespace {

#if LLM42_X86

constexpr int kRows = 6;   // activation rows per tile
constexpr int kPairs = 4;  // 512-bit registers of two weight rows each per tile
constexpr int kCols = 2 * kPairs;

// Weight i of a row as f32 (exact for these types).
float WeightAt(GgmlType type, const uint8_t* row, int64_t i) {
  uint16_t h;
  switch (type) {
    case GgmlType::kF16:
      std::memcpy(&h, row + 2 * i, 2);
      return Fp16ToFp32(h);
    case GgmlType::kBF16:
      std::memcpy(&h, row + 2 * i, 2);
      return Bf16ToFp32(h);
    default: {
      float f;
      std::memcpy(&f, row + 4 * i, 4);
      return f;
    }
  }
}

// Eight weights of a row from i, as f32.
LLM42_AVX512 inline __m256 Load8(GgmlType type, const uint8_t* row, int64_t i) {
  switch (type) {
    case GgmlType::kF16:
      return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
    case GgmlType::kBF16: {
      const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
      return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
    }
    default:
      return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i);
  }
}

// Weight rows [c0, c0 + kCols) (zeros past r1), steps of eight K values:
// panel[(s * kPairs + p) * 16 + h * 8 + l] = w[c0 + 2p + h][8s + l].
LLM42_AVX512 void Pack(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t c0, int64_t r1, int64_t k8,
                       float* panel) {
  for (int p = 0; p < kPairs; ++p) {
    for (int h = 0; h < 2; ++h) {
      const int64_t c = c0 + 2 * p + h;
      float* dst = panel + p * 16 + h * 8;
      if (c >= r1) {
        for (int64_t s = 0; s < k8; ++s) _mm256_storeu_ps(dst + s * kPairs * 16, _mm256_setzero_ps());
        continue;
      }
      const uint8_t* row = w + static_cast<size_t>(c) * row_bytes;
      for (int64_t s = 0; s < k8; ++s) _mm256_storeu_ps(dst + s * kPairs * 16, Load8(type, row, 8 * s));
    }
  }
}


// Where a tile's weights come from, as pairs of rows in 512-bit registers: a packed panel, or
// (Direct) the rows themselves, converted in registers.
struct PanelWeights {
  const float* panel;
  LLM42_AVX512 __m512 Pair(int p, int64_t s) const { return _mm512_loadu_ps(panel + (s * kPairs + p) * 16); }
};
template <typename V>
struct DirectWeights {
  const uint8_t* row[kCols];  // nullptr past r1: zeros
  LLM42_AVX512 __m512 Pair(int p, int64_t s) const {
    const __m256 lo = row[2 * p] != nullptr ? V::Load8(row[2 * p], 8 * s) : _mm256_setzero_ps();
    const __m256 hi = row[2 * p + 1] != nullptr ? V::Load8(row[2 * p + 1], 8 * s) : _mm256_setzero_ps();
    return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
  }
};

template <int R, typename Src>
LLM42_AVX512 void Tile(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t c0, int64_t r1,
                       const Src& src, int64_t k, const float* const* xr, float* const* yr) {
  const int64_t k8 = k / 8;
  __m512 acc[R][kPairs];
  for (int r = 0; r < R; ++r) {
    for (int p = 0; p < kPairs; ++p) acc[r][p] = _mm512_setzero_ps();
  }
  // Unrolled in full so that the accumulators live in registers (GCC's -O2 leaves these loops).
  for (int64_t s = 0; s < k8; ++s) {
    __m512 wv[kPairs];
#pragma GCC unroll 4
    for (int p = 0; p < kPairs; ++p) wv[p] = src.Pair(p, s);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m512 xv = _mm512_broadcast_f32x8(_mm256_loadu_ps(xr[r] + 8 * s));
#pragma GCC unroll 4
      for (int p = 0; p < kPairs; ++p) acc[r][p] = _mm512_fmadd_ps(wv[p], xv, acc[r][p]);
    }
  }
  if (k % 8 == 0 && c0 + kCols <= r1) {
    // Whole panels without tail elements: two activation rows' 8 outputs reduced at once
    // (FixedTreeSum16: quarter 0 holds row r's even columns, 1 its odd ones, 2 and 3 row r + 1's),
    // put back in column order, stored as 8 consecutive floats per row.
    const __m512i order = _mm512_set_epi32(15, 11, 14, 10, 13, 9, 12, 8, 7, 3, 6, 2, 5, 1, 4, 0);
#pragma GCC unroll 3
    for (int r = 0; r < R; r += 2) {
      const int r2 = r + 1 < R ? r + 1 : r;
      const __m512 sums = _mm512_permutexvar_ps(order, FixedTreeSum16(acc[r], acc[r2]));
      _mm256_storeu_ps(yr[r] + c0, _mm512_castps512_ps256(sums));
      if (r2 != r) _mm256_storeu_ps(yr[r2] + c0, _mm512_extractf32x8_ps(sums, 1));
    }
    return;
  }
  for (int r = 0; r < R; ++r) {
    for (int p = 0; p < kPairs; ++p) {
      for (int h = 0; h < 2; ++h) {
        const int64_t c = c0 + 2 * p + h;
        if (c >= r1) continue;
        float sum = FixedTreeSum(h == 0 ? _mm512_castps512_ps256(acc[r][p]) : _mm512_extractf32x8_ps(acc[r][p], 1));
        const uint8_t* row = w + static_cast<size_t>(c) * row_bytes;
        for (int64_t t = 8 * k8; t < k; ++t) sum = std::fma(WeightAt(type, row, t), xr[r][t], sum);
        yr[r][c] = sum;
      }
    }
  }
}
// Tile<nr> for 1 <= nr <= kRows activation rows.
template <typename Src>
LLM42_AVX512 void RunTile(int nr, GgmlType type, const uint8_t* w, size_t row_bytes, int64_t c0, int64_t r1,
                          const Src& src, int64_t k, const float* const* xr, float* const* yr) {
  switch (nr) {
    case 1: return Tile<1>(type, w, row_bytes, c0, r1, src, k, xr, yr);
    case 2: return Tile<2>(type, w, row_bytes, c0, r1, src, k, xr, yr);
    case 3: return Tile<3>(type, w, row_bytes, c0, r1, src, k, xr, yr);
    case 4: return Tile<4>(type, w, row_bytes, c0, r1, src, k, xr, yr);
    case 5: return Tile<5>(type, w, row_bytes, c0, r1, src, k, xr, yr);
    default: return Tile<6>(type, w, row_bytes, c0, r1, src, k, xr, yr);
  }
}

template <typename V>
LLM42_AVX512 void DirectGemmT(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1,
                              const float* x, int64_t k, const int64_t* rows, int64_t n_rows, float* y, int64_t ldy) {
  const float* xr[kRows];
  float* yr[kRows];
  for (int64_t c0 = r0; c0 < r1; c0 += kCols) {
    DirectWeights<V> src;
    for (int c = 0; c < kCols; ++c) src.row[c] = c0 + c < r1 ? w + static_cast<size_t>(c0 + c) * row_bytes : nullptr;
    for (int64_t i = 0; i < n_rows; i += kRows) {
      const int nr = static_cast<int>(std::min<int64_t>(kRows, n_rows - i));
      for (int j = 0; j < nr; ++j) {
        xr[j] = x + rows[i + j] * k;
        yr[j] = y + rows[i + j] * ldy;
      }
      RunTile(nr, type, w, row_bytes, c0, r1, src, k, xr, yr);
    }
  }
}
#endif  // LLM42_X86

}  // namespace

bool PackedGemmSupports(GgmlType type) {
  return type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16;
}

bool PackedGemmAvailable(bool allow_simd) {
#if LLM42_X86
  // LLM42_CPU_PACKED=off turns it off (to measure what it pays).
  static const bool has = CpuHasAvx512() &&
                          !(std::getenv("LLM42_CPU_PACKED") != nullptr && std::strcmp(std::getenv("LLM42_CPU_PACKED"), "off") == 0);
  return allow_simd && has;
#else
  (void)allow_simd;
  return false;
#endif
}

void PackedGemm(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, const float* x,
                int64_t k, const int64_t* rows, int64_t n_rows, float* y, int64_t ldy, std::vector<float>& panel) {
#if LLM42_X86
  const int64_t k8 = k / 8;
  panel.resize(static_cast<size_t>(std::max<int64_t>(1, k8) * kPairs * 16));
  const float* xr[kRows];
  float* yr[kRows];
  for (int64_t c0 = r0; c0 < r1; c0 += kCols) {
    Pack(type, w, row_bytes, c0, r1, k8, panel.data());
    for (int64_t i = 0; i < n_rows; i += kRows) {
      const int nr = static_cast<int>(std::min<int64_t>(kRows, n_rows - i));
      for (int j = 0; j < nr; ++j) {
        xr[j] = x + rows[i + j] * k;
        yr[j] = y + rows[i + j] * ldy;
      }
      RunTile(nr, type, w, row_bytes, c0, r1, PanelWeights{panel.data()}, k, xr, yr);
    }
  }
#else
  (void)type, (void)w, (void)row_bytes, (void)r0, (void)r1, (void)x, (void)k, (void)rows, (void)n_rows, (void)y,
      (void)ldy, (void)panel;
#endif
}

void DirectGemm(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, const float* x,
                int64_t k, const int64_t* rows, int64_t n_rows, float* y, int64_t ldy) {
#if LLM42_X86
  switch (type) {
    case GgmlType::kF16: return DirectGemmT<F16Vec>(type, w, row_bytes, r0, r1, x, k, rows, n_rows, y, ldy);
    case GgmlType::kBF16: return DirectGemmT<Bf16Vec>(type, w, row_bytes, r0, r1, x, k, rows, n_rows, y, ldy);
    default: return DirectGemmT<F32Vec>(type, w, row_bytes, r0, r1, x, k, rows, n_rows, y, ldy);
  }
#else
  (void)type, (void)w, (void)row_bytes, (void)r0, (void)r1, (void)x, (void)k, (void)rows, (void)n_rows, (void)y,
      (void)ldy;
#endif
}

}  // namespace llm42::internal
