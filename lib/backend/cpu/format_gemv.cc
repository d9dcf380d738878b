#include "lib/backend/cpu/format_gemv.h"

#include "lib/backend/cpu/fixed_tree.h"
#include "lib/backend/cpu/simd_targets.h"
#include "lib/backend/cpu/weight_loaders.h"

namespace llm42::internal {
namespace {

#if LLM42_X86
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
    for (int r = 0; r < R; ++r) rows[r] = reinterpret_cast<const Block*>(w + static_cast<size_t>(g + r) * row_bytes);
    __m256 acc[R][U];
    for (int r = 0; r < R; ++r) {
      for (int u = 0; u < U; ++u) acc[r][u] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < nb; ++b) {
      // The next rows' bytes at this place, a block ahead of the group after this one.
      for (int r = 0; r < R; ++r) {
        PrefetchLines<sizeof(Block)>(reinterpret_cast<const uint8_t*>(rows[r] + b) + static_cast<size_t>(R) * row_bytes);
      }
      const float* xb = x + b * F::kBlock;
      for (int64_t s = 0; s < F::kBlock / F::kSub; ++s) {
        __m256 a[R], c[R];
        for (int r = 0; r < R; ++r) {
          const SubBlockScale sc = F::Scale(rows[r][b], s);
          a[r] = _mm256_set1_ps(sc.a);
          c[r] = _mm256_set1_ps(sc.c);
        }
#pragma GCC unroll 4
        for (int64_t j = s * F::kSub; j < (s + 1) * F::kSub; j += 8) {
          const __m256 xv = _mm256_loadu_ps(xb + j);
          const int u = static_cast<int>(j / 8 % U);
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
      // fixed bits agree with their replay.
      gemv = WideGemv{FormatGemvRows<F, 4, 1>, 4};
    }
  });
#else
  (void)type, (void)allow_simd;
#endif
  (void)family;
  return gemv;
}

}  // namespace llm42::internal
