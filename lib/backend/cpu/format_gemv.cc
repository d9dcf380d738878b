#include "lib/backend/cpu/format_gemv.h"

#include "lib/backend/cpu/fixed_tree.h"
#include "lib/backend/cpu/simd_targets.h"
#include "lib/backend/cpu/weight_loaders.h"

namespace llm42::internal {
namespace {

#if LLM42_X86
// Rows g .. g + R - 1 from w (consecutive, row_bytes apart) as blocks.
template <typename Block, int R>
inline void GroupRows(const uint8_t* w, size_t row_bytes, int64_t g, const Block** rows) {
  for (int r = 0; r < R; ++r) rows[r] = reinterpret_cast<const Block*>(w + static_cast<size_t>(g + r) * row_bytes);
}

// Block b of the next group's rows (R rows further on), a group ahead of the one being read.
template <typename Block, int R>
inline void PrefetchNextGroup(const Block* const* rows, int64_t b, size_t row_bytes) {
  for (int r = 0; r < R; ++r) {
    PrefetchLines<sizeof(Block)>(reinterpret_cast<const uint8_t*>(rows[r] + b) + static_cast<size_t>(R) * row_bytes);
  }
}

// R rows from w (consecutive, row_bytes apart) against x: out[r]. U chains per row over
// alternate eight-element steps (a block's steps number a multiple of two, so step parity is the
// same within a block as over the row).
template <typename F, int R, int U>
LLM42_AVX2 void FormatGemvRows(const uint8_t* w, size_t row_bytes, int64_t n_rows, const float* x, int64_t k,
                               float* out) {
  using Block = typename F::Block;
  const int64_t nb = k / F::kBlock;
  for (int64_t g = 0; g < n_rows; g += R) {
    const Block* rows[R];
    GroupRows<Block, R>(w, row_bytes, g, rows);
    __m256 acc[R][U];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      for (int u = 0; u < U; ++u) acc[r][u] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < nb; ++b) {
      PrefetchNextGroup<Block, R>(rows, b, row_bytes);
      const float* xb = x + b * F::kBlock;
      for (int64_t s = 0; s < F::kBlock / F::kSub; ++s) {
        __m256 a[R], c[R];
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const SubBlockScale sc = F::Scale(rows[r][b], s);
          a[r] = _mm256_set1_ps(sc.a);
          c[r] = _mm256_set1_ps(sc.c);
        }
#pragma GCC unroll 4
        for (int64_t j = s * F::kSub; j < (s + 1) * F::kSub; j += 8) {
          const __m256 xv = _mm256_loadu_ps(xb + j);
          const int u = static_cast<int>(j / 8 % U);
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) {
            __m256 v = _mm256_mul_ps(a[r], _mm256_cvtepi32_ps(F::Q8(rows[r][b], j)));
            if constexpr (F::kOffset) v = _mm256_add_ps(v, c[r]);
            acc[r][u] = _mm256_fmadd_ps(v, xv, acc[r][u]);
          }
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int u = 1; u < U; ++u) acc[r][0] = _mm256_add_ps(acc[r][0], acc[r][u]);
      out[g + r] = FixedTreeSum(acc[r][0]);
    }
  }
}

// (The loops over rows are unrolled so that their accumulators, scales and offsets live in
// registers: left rolled, GCC kept them in stack arrays and every fused multiply-add waited on a
// store and a load — llama-110m q4_k fixed decode, two threads, AVX-512: 70 -> 109 tok/s. The
// arithmetic, and so the bits, are the same.)
// The same arithmetic on 512-bit registers, two rows to a register (row 2p in lanes 0-7, row
// 2p + 1 in lanes 8-15, each lane's chain the 256-bit kernel's), so one conversion, multiply,
// offset and fused multiply-add serve 16 weights: R rows (a multiple of 2) at a time.
template <typename F, int R>
LLM42_AVX512 void FormatGemvRows512(const uint8_t* w, size_t row_bytes, int64_t n_rows, const float* x, int64_t k,
                                    float* out) {
  static_assert(R % 2 == 0, "rows go two to a register");
  constexpr int P = R / 2;
  using Block = typename F::Block;
  const int64_t nb = k / F::kBlock;
  for (int64_t g = 0; g < n_rows; g += R) {
    const Block* rows[R];
    GroupRows<Block, R>(w, row_bytes, g, rows);
    __m512 acc[P];
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) acc[p] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      PrefetchNextGroup<Block, R>(rows, b, row_bytes);
      const float* xb = x + b * F::kBlock;
      for (int64_t s = 0; s < F::kBlock / F::kSub; ++s) {
        __m512 a[P], c[P];
#pragma GCC unroll 8
        for (int p = 0; p < P; ++p) {
          const SubBlockScale lo = F::Scale(rows[2 * p][b], s), hi = F::Scale(rows[2 * p + 1][b], s);
          a[p] = _mm512_insertf32x8(_mm512_set1_ps(lo.a), _mm256_set1_ps(hi.a), 1);
          c[p] = _mm512_insertf32x8(_mm512_set1_ps(lo.c), _mm256_set1_ps(hi.c), 1);
        }
#pragma GCC unroll 4
        for (int64_t j = s * F::kSub; j < (s + 1) * F::kSub; j += 8) {
          const __m512 xv = _mm512_broadcast_f32x8(_mm256_loadu_ps(xb + j));
#pragma GCC unroll 8
          for (int p = 0; p < P; ++p) {
            const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(F::Q8(rows[2 * p][b], j)), F::Q8(rows[2 * p + 1][b], j), 1);
            __m512 v = _mm512_mul_ps(a[p], _mm512_cvtepi32_ps(q));
            if constexpr (F::kOffset) v = _mm512_add_ps(v, c[p]);
            acc[p] = _mm512_fmadd_ps(v, xv, acc[p]);
          }
        }
      }
    }
    for (int p = 0; p < P; ++p) {
      out[g + 2 * p] = FixedTreeSum(_mm512_castps512_ps256(acc[p]));
      out[g + 2 * p + 1] = FixedTreeSum(_mm512_extractf32x8_ps(acc[p], 1));
    }
  }
}
#endif

}  // namespace

WideGemv SelectFormatGemv(GgmlType type, DotFamily family, bool allow_simd) {
  WideGemv gemv;
#if LLM42_X86
  if (!allow_simd || !CpuHasAvx2()) return gemv;
  WithElementLoader(type, [&](auto l) {
    using L = decltype(l);
    if constexpr (requires { typename L::Format; }) {
      using F = typename L::Format;
      // Four rows' single chains interleaved (each chain waits on its fused multiply-add), for
      // both families: fast's own two rows of two chains ran slower (llama-110m q4_k decode, two
      // threads, on a Zen 4: 124 against 161 tok/s; q6_k 91 against 105), and fast rows with the
      // fixed bits agree with their replay. (On AVX-512 VNNI the backend decodes Q4_K, Q5_K, Q6_K
      // and IQ4_XS fast rows with kquant_gemv.h's integer kernels instead.)
      gemv = CpuHasAvx512() ? WideGemv{FormatGemvRows512<F, 4>, 4} : WideGemv{FormatGemvRows<F, 4, 1>, 4};
    }
  });
#else
  (void)type, (void)allow_simd;
#endif
  (void)family;
  return gemv;
}

}  // namespace llm42::internal
