#include "lib/backend/cpu/bf16_gemm.h"

#include <algorithm>
#include <cstring>

#include "lib/backend/cpu/row_dot.h"
#include "lib/backend/cpu/simd_targets.h"

namespace llm42::internal {
namespace {

#if LLM42_X86

// Weight rows per panel: one per lane.
constexpr int kCols = 16;
// A tile: kTileRows activation rows x kTilePanels panels (32 weight rows): 24 accumulators, the
// two panels' pairs and a broadcast activation pair in the 32 registers.
constexpr int kTileRows = 12, kTilePanels = 2;
// Blocking, as packed_gemm.h's: the panels of a group (at most kGroupBytes of them, packed once)
// run against kRowBlock activation rows at a time, so that a block's rows stay in cache while the
// group's panels pass; rows longer than kChunkPairs pairs (2048 values) run a chunk of K at a
// time, each chunk's partial sums kept in y.
constexpr int64_t kGroupBytes = int64_t{512} << 10;
constexpr int64_t kRowBlock = 4 * kTileRows;
constexpr int64_t kChunkPairs = 1024;

// Transposes a 16 x 16 block of 32-bit words in registers: r[i] (lane j) -> r[j] (lane i).
LLM42_BF16DOT512 inline void Transpose16(__m512i (&r)[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {  // within 128-bit lanes: rows i, i + 1 interleaved
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // lane-local column q of rows i..i+3 in u[i + q]
    u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int q = 0; q < 4; ++q) {  // column 4j + q: 128-bit lane j of u[q], u[4 + q], u[8 + q], u[12 + q]
    const __m512i even_a = _mm512_shuffle_i32x4(u[q], u[4 + q], 0x88);
    const __m512i even_b = _mm512_shuffle_i32x4(u[8 + q], u[12 + q], 0x88);
    const __m512i odd_a = _mm512_shuffle_i32x4(u[q], u[4 + q], 0xDD);
    const __m512i odd_b = _mm512_shuffle_i32x4(u[8 + q], u[12 + q], 0xDD);
    r[q] = _mm512_shuffle_i32x4(even_a, even_b, 0x88);
    r[4 + q] = _mm512_shuffle_i32x4(odd_a, odd_b, 0x88);
    r[8 + q] = _mm512_shuffle_i32x4(even_a, even_b, 0xDD);
    r[12 + q] = _mm512_shuffle_i32x4(odd_a, odd_b, 0xDD);
  }
}

// Pair p of a bf16 row of k values (an odd k's last pair padded with zero).
inline uint32_t PairAt(const uint8_t* row, int64_t p, int64_t k) {
  uint32_t v = 0;
  std::memcpy(&v, row + 4 * p, 2 * p + 1 < k ? 4 : 2);
  return v;
}

// Pairs [q0, q1) of weight rows [c0, c0 + 16) (zeros from r_end) into a panel:
// out[(p - q0) * 16 + lane] = pair p of row c0 + lane.
LLM42_BF16DOT512 void PackPanel(const uint8_t* w, size_t row_bytes, int64_t c0, int64_t r_end, int64_t k, int64_t q0,
                                int64_t q1, uint32_t* out) {
  const int valid = static_cast<int>(std::min<int64_t>(kCols, r_end - c0));
  const int64_t whole = std::min(q1, k / 2);  // pairs that lie inside the row
  int64_t p = q0;
  for (; p + 16 <= whole; p += 16) {
    __m512i r[16];
    for (int i = 0; i < 16; ++i) {
      r[i] = i < valid ? _mm512_loadu_si512(w + static_cast<size_t>(c0 + i) * row_bytes + 4 * p)
                       : _mm512_setzero_si512();
    }
    Transpose16(r);
    for (int i = 0; i < 16; ++i) _mm512_store_si512(out + (p - q0 + i) * kCols, r[i]);
  }
  for (; p < q1; ++p) {
    for (int lane = 0; lane < kCols; ++lane) {
      out[(p - q0) * kCols + lane] = lane < valid ? PairAt(w + static_cast<size_t>(c0 + lane) * row_bytes, p, k) : 0;
    }
  }
}

// R activation rows (xr: their pairs from the chunk's first) against P panels (panel j at
// panel + j * stride) over np pairs: y columns [0, cols) of each row (yr at the panels' first
// column), from zero or, where accumulate, from y's partial sums of the chunks before.
template <int R, int P>
LLM42_BF16DOT512 void Tile(const uint32_t* panel, int64_t stride, int64_t np, const uint32_t* const* xr,
                           float* const* yr, int64_t cols, bool accumulate) {
  __mmask16 mask[P];
  for (int j = 0; j < P; ++j) {
    const int64_t n = std::clamp<int64_t>(cols - kCols * j, 0, kCols);
    mask[j] = static_cast<__mmask16>((uint32_t{1} << n) - 1);
  }
  __m512 acc[R][P];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
    for (int j = 0; j < P; ++j) {
      acc[r][j] = accumulate ? _mm512_maskz_loadu_ps(mask[j], yr[r] + kCols * j) : _mm512_setzero_ps();
    }
  }
  for (int64_t p = 0; p < np; ++p) {
    __m512i wv[P];
#pragma GCC unroll 2
    for (int j = 0; j < P; ++j) wv[j] = _mm512_load_si512(panel + j * stride + p * kCols);
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      const __m512i xv = _mm512_set1_epi32(static_cast<int>(xr[r][p]));
#pragma GCC unroll 2
      for (int j = 0; j < P; ++j) acc[r][j] = _mm512_dpbf16_ps(acc[r][j], (__m512bh)wv[j], (__m512bh)xv);
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
    for (int j = 0; j < P; ++j) _mm512_mask_storeu_ps(yr[r] + kCols * j, mask[j], acc[r][j]);
  }
}

template <int P>
void RunTile(int nr, const uint32_t* panel, int64_t stride, int64_t np, const uint32_t* const* xr, float* const* yr,
             int64_t cols, bool accumulate) {
  switch (nr) {
    case 1: return Tile<1, P>(panel, stride, np, xr, yr, cols, accumulate);
    case 2: return Tile<2, P>(panel, stride, np, xr, yr, cols, accumulate);
    case 3: return Tile<3, P>(panel, stride, np, xr, yr, cols, accumulate);
    case 4: return Tile<4, P>(panel, stride, np, xr, yr, cols, accumulate);
    case 5: return Tile<5, P>(panel, stride, np, xr, yr, cols, accumulate);
    case 6: return Tile<6, P>(panel, stride, np, xr, yr, cols, accumulate);
    case 7: return Tile<7, P>(panel, stride, np, xr, yr, cols, accumulate);
    case 8: return Tile<8, P>(panel, stride, np, xr, yr, cols, accumulate);
    case 9: return Tile<9, P>(panel, stride, np, xr, yr, cols, accumulate);
    case 10: return Tile<10, P>(panel, stride, np, xr, yr, cols, accumulate);
    case 11: return Tile<11, P>(panel, stride, np, xr, yr, cols, accumulate);
    default: return Tile<12, P>(panel, stride, np, xr, yr, cols, accumulate);
  }
}

LLM42_BF16DOT512 void RoundRows(const float* x, int64_t k, const int64_t* rows, int64_t n_rows, uint32_t* out) {
  const int64_t pairs = Bf16Pairs(k);
  for (int64_t i = 0; i < n_rows; ++i) {
    const float* src = x + rows[i] * k;
    auto* dst = reinterpret_cast<uint16_t*>(out + rows[i] * pairs);
    for (int64_t t = 0; t < k; t += 32) {
      const int64_t n = std::min<int64_t>(32, k - t);
      const auto lo = static_cast<__mmask16>((uint32_t{1} << std::min<int64_t>(16, n)) - 1);
      const auto hi = static_cast<__mmask16>((uint32_t{1} << std::max<int64_t>(0, n - 16)) - 1);
      const __m512bh b =
          _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, src + t + 16), _mm512_maskz_loadu_ps(lo, src + t));
      const int64_t words = 2 * ((n + 1) / 2);  // with an odd k's zero pad
      const auto store = words == 32 ? ~__mmask32{0} : static_cast<__mmask32>((uint32_t{1} << words) - 1);
      _mm512_mask_storeu_epi16(dst + t, store, (__m512i)b);
    }
  }
}

#endif  // LLM42_X86

}  // namespace

bool Bf16GemmAvailable(bool allow_simd) { return allow_simd && CpuHasBf16Dot512(); }

void RoundActivationsToBf16(const float* x, int64_t k, const int64_t* rows, int64_t n_rows, uint32_t* out) {
#if LLM42_X86
  RoundRows(x, k, rows, n_rows, out);
#else
  (void)x, (void)k, (void)rows, (void)n_rows, (void)out;
#endif
}

void Bf16Gemm(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, const uint32_t* xb, int64_t k,
              const int64_t* rows, int64_t n_rows, float* y, int64_t ldy, AlignedVector<uint32_t>& panel) {
#if LLM42_X86
  const int64_t pairs = Bf16Pairs(k);
  const int64_t chunk = std::max<int64_t>(1, std::min(pairs, kChunkPairs));
  const int64_t panel_words = chunk * kCols;
  const int64_t group_panels =
      std::clamp<int64_t>(kGroupBytes / (panel_words * 4), 1, (r1 - r0 + kCols - 1) / kCols);
  panel.resize(static_cast<size_t>(group_panels * panel_words));
  const uint32_t* xr[kTileRows];
  float* yr[kTileRows];
  for (int64_t g0 = r0; g0 < r1; g0 += group_panels * kCols) {
    const int64_t g1 = std::min(r1, g0 + group_panels * kCols);
    const int64_t np = (g1 - g0 + kCols - 1) / kCols;
    for (int64_t q0 = 0; q0 < pairs; q0 += chunk) {
      const int64_t q1 = std::min(pairs, q0 + chunk);
      for (int64_t j = 0; j < np; ++j) {
        PackPanel(w, row_bytes, g0 + j * kCols, g1, k, q0, q1, panel.data() + j * panel_words);
      }
      for (int64_t m0 = 0; m0 < n_rows; m0 += kRowBlock) {
        const int64_t m1 = std::min(n_rows, m0 + kRowBlock);
        for (int64_t j = 0; j < np; j += kTilePanels) {
          const int64_t c0 = g0 + j * kCols;
          for (int64_t i = m0; i < m1; i += kTileRows) {
            const int nr = static_cast<int>(std::min<int64_t>(kTileRows, m1 - i));
            for (int t = 0; t < nr; ++t) {
              xr[t] = xb + rows[i + t] * pairs + q0;
              yr[t] = y + rows[i + t] * ldy + c0;
            }
            const uint32_t* first = panel.data() + j * panel_words;
            if (j + 1 < np) {
              RunTile<2>(nr, first, panel_words, q1 - q0, xr, yr, g1 - c0, q0 > 0);
            } else {
              RunTile<1>(nr, first, panel_words, q1 - q0, xr, yr, g1 - c0, q0 > 0);
            }
          }
        }
      }
    }
  }
#else
  (void)w, (void)row_bytes, (void)r0, (void)r1, (void)xb, (void)k, (void)rows, (void)n_rows, (void)y, (void)ldy,
      (void)panel;
#endif
}

}  // namespace llm42::internal
