#include "lib/backend/cpu/packed_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "lib/backend/cpu/fixed_tree.h"
#include "lib/backend/cpu/row_dot.h"
#include "lib/backend/cpu/simd_targets.h"
#include "lib/backend/cpu/weight_loaders.h"
#include "lib/numerics/portable_math.h"
#include "lib/util/thread_scratch.h"

namespace llm42::internal {
namespace {

#if LLM42_X86

// The fixed arithmetic's end for one output: its accumulator's tree sum, then a fused
// multiply-add per element past the 8-element steps (the element loaders' exact values).
float FinishRow(float tree, GgmlType type, const uint8_t* row, const float* x, int64_t k8, int64_t k) {
  WithElementLoader(type, [&](auto loader) {
    for (int64_t t = 8 * k8; t < k; ++t) tree = PortableFmaf(decltype(loader)::At(row, t), x[t], tree);
  });
  return tree;
}

// Weight rows [c0, c0 + cols) (zeros past r1), steps of eight K values:
// panel[(s * cols + c) * 8 + l] = w[c0 + c][8s + l]. Both kernels read this layout (AVX-512 two
// consecutive rows per register).
template <typename V>
LLM42_AVX2 void PackT(int cols, const uint8_t* w, size_t row_bytes, int64_t c0, int64_t r1, int64_t k8, float* panel) {
  for (int c = 0; c < cols; ++c) {
    float* dst = panel + c * 8;
    if (c0 + c >= r1) {
      for (int64_t s = 0; s < k8; ++s) _mm256_storeu_ps(dst + s * cols * 8, _mm256_setzero_ps());
      continue;
    }
    const uint8_t* row = w + static_cast<size_t>(c0 + c) * row_bytes;
    for (int64_t s = 0; s < k8; ++s) _mm256_storeu_ps(dst + s * cols * 8, V::Load8(row, 8 * s));
  }
}
void Pack(int cols, GgmlType type, const uint8_t* w, size_t row_bytes, int64_t c0, int64_t r1, int64_t k8,
          float* panel) {
  WithElementLoader(type, [&](auto l) { PackT<VecOf<decltype(l)>>(cols, w, row_bytes, c0, r1, k8, panel); });
}

// The next panel's weight rows, a share asked for (software prefetch) before each row group of
// this panel runs, so that packing them reads cache: a pack reading them from memory stalled
// the kernel (12 % of a 768 x 768 f32 GEMM's samples at 48 activation rows, one thread).
struct PanelAhead {
  const uint8_t* next = nullptr;  // nullptr: nothing ahead
  int64_t bytes = 0, share = 0;   // share: bytes per row group, whole cache lines
  void Ahead(int64_t group) const {
    const int64_t off = group * share;
    if (next != nullptr && off < bytes) PrefetchSpan(next + off, std::min(share, bytes - off));
  }
};

// The 8-element steps [s0, s1) of K a kernel call runs, and where a tile keeps its accumulators
// between calls (state: nullptr where one call runs every step). A tile continues from its
// state where s0 > 0 and leaves its accumulators there where s1 < k / 8, so each accumulator
// sees the same fused multiply-adds in the same order however K is cut: the same bits.
struct Steps {
  int64_t s0 = 0, s1 = 0;
  float* state = nullptr;
};

// A tile's weight rows read in place (DirectGemm): kCols consecutive rows of a matrix, those past
// its end repeating its last row (their outputs are not stored), and the read-ahead of the rows
// after them: each 8-element step asks for the step's share of the panel kLeadPanels on, so the
// next panels arrive while this one runs. (Without it, small batches left the weights streaming
// at well under the read bandwidth.)
template <typename V, int kCols>
struct DirectRows {
  static constexpr int64_t kLeadPanels = 2;
  // A step's share of a panel, in whole cache lines (rounded up for the block types' nominal byte).
  static constexpr int kStepBytes = (kCols * 8 * V::kBytes + 63) / 64 * 64;
  static_assert(kStepBytes % 64 == 0, "a step reads whole cache lines of the panel");
  const uint8_t* row[kCols];
  uintptr_t lead;  // the panel kLeadPanels on, else (the last panels) this one: no test per step
  static void Ahead(int64_t) {}
  void Place(const uint8_t* w, size_t row_bytes, int64_t c0, int64_t r1) {
    for (int c = 0; c < kCols; ++c) row[c] = w + static_cast<size_t>(std::min(c0 + c, r1 - 1)) * row_bytes;
    // The panels' rows are consecutive, so the one kLeadPanels on starts that many panels later;
    // its steps' shares cover it where its rows are as long as these. (A prefetch past the
    // matrix's end, in the last panels, asks for nothing and cannot fault.)
    const int64_t ahead = c0 + kLeadPanels * kCols;
    lead = reinterpret_cast<uintptr_t>(w) + static_cast<uintptr_t>(ahead + kCols <= r1 ? ahead : c0) * row_bytes;
  }
  void Fetch(int64_t s) const {
    const uintptr_t at = lead + static_cast<uintptr_t>(s * kStepBytes);
    for (int b = 0; b < kStepBytes; b += 64) _mm_prefetch(reinterpret_cast<const char*>(at + b), _MM_HINT_T0);
  }
};

// A tile's accumulators (either kernel's vectors) at the start of its steps: from its state
// where an earlier call ran the steps before, else zeros.
template <typename Vec, int R, int C>
__attribute__((always_inline)) inline void StartAccumulators(const Steps& steps, Vec (&acc)[R][C]) {
  constexpr int kLanes = sizeof(Vec) / sizeof(float);
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      if (steps.s0 > 0) {
        std::memcpy(&acc[r][c], steps.state + (r * C + c) * kLanes, sizeof(Vec));
      } else {
        acc[r][c] = Vec{};
      }
    }
  }
}

// After its steps: true (the accumulators kept in its state for the next call) where steps of K
// remain, false where the tile goes on to its outputs.
template <typename Vec, int R, int C>
__attribute__((always_inline)) inline bool KeepAccumulators(const Steps& steps, int64_t k8, const Vec (&acc)[R][C]) {
  if (steps.s1 >= k8) return false;
  constexpr int kLanes = sizeof(Vec) / sizeof(float);
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) std::memcpy(steps.state + (r * C + c) * kLanes, &acc[r][c], sizeof(Vec));
  }
  return true;
}

// Every group of up to K::kRows activation rows against weight rows [c0, c0 + K::kCols), a kernel
// call (K::RunTile) per group over steps.s0..s1 (group g's state K::kStateFloats floats on from
// steps.state), each group first asking for its share of what src reads ahead.
template <typename K, typename Src>
void RowGroups(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t c0, int64_t r1, const Src& src,
               const float* x, int64_t k, const int64_t* rows, int64_t n_rows, float* y, int64_t ldy, Steps steps) {
  const float* xr[K::kRows];
  float* yr[K::kRows];
  for (int64_t i = 0; i < n_rows; i += K::kRows) {
    src.Ahead(i / K::kRows);
    const int nr = static_cast<int>(std::min<int64_t>(K::kRows, n_rows - i));
    for (int j = 0; j < nr; ++j) {
      xr[j] = x + rows[i + j] * k;
      yr[j] = y + rows[i + j] * ldy;
    }
    Steps group = steps;
    if (steps.state != nullptr) group.state = steps.state + i / K::kRows * K::kStateFloats;
    K::RunTile(nr, type, w, row_bytes, c0, r1, src, k, xr, yr, group);
  }
}

// AVX-512: weight rows two per register (row c in lanes 0-7, c + 1 in lanes 8-15), eight
// activation values broadcast to both halves; 6 activation rows x 4 such registers.
struct Avx512Kernel {
  static constexpr int kRows = 6, kPairs = 4, kCols = 2 * kPairs;
  static constexpr int64_t kStateFloats = kRows * kPairs * 16;

  // Where a tile's weights come from: a packed panel, or (Direct) the rows themselves,
  // converted in registers.
  struct Panel : PanelAhead {
    const float* panel;
    LLM42_AVX512 __m512 Pair(int p, int64_t s) const { return _mm512_loadu_ps(panel + (s * kCols + 2 * p) * 8); }
    static void Fetch(int64_t) {}
  };
  template <typename V>
  struct Direct : DirectRows<V, kCols> {
    LLM42_AVX512 __m512 Pair(int p, int64_t s) const {
      return _mm512_insertf32x8(_mm512_castps256_ps512(V::Load8(this->row[2 * p], 8 * s)),
                                V::Load8(this->row[2 * p + 1], 8 * s), 1);
    }
  };

  template <int R, typename Src>
  LLM42_AVX512 static void Tile(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t c0, int64_t r1,
                                const Src& src, int64_t k, const float* const* xr, float* const* yr,
                                const Steps& steps) {
    const int64_t k8 = k / 8;
    __m512 acc[R][kPairs];
    StartAccumulators(steps, acc);
    // Unrolled in full so that the accumulators live in registers (GCC's -O2 leaves these loops).
    for (int64_t s = steps.s0; s < steps.s1; ++s) {
      src.Fetch(s);
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
    if (KeepAccumulators(steps, k8, acc)) return;
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
      for (int c = 0; c < kCols && c0 + c < r1; ++c) {
        const __m512 a = acc[r][c / 2];
        const float tree = FixedTreeSum(c % 2 == 0 ? _mm512_castps512_ps256(a) : _mm512_extractf32x8_ps(a, 1));
        yr[r][c0 + c] = FinishRow(tree, type, w + static_cast<size_t>(c0 + c) * row_bytes, xr[r], k8, k);
      }
    }
  }
  template <typename Src>
  LLM42_AVX512 static void RunTile(int nr, GgmlType type, const uint8_t* w, size_t row_bytes, int64_t c0, int64_t r1,
                                   const Src& src, int64_t k, const float* const* xr, float* const* yr,
                                   const Steps& steps) {
    switch (nr) {
      case 1: return Tile<1>(type, w, row_bytes, c0, r1, src, k, xr, yr, steps);
      case 2: return Tile<2>(type, w, row_bytes, c0, r1, src, k, xr, yr, steps);
      case 3: return Tile<3>(type, w, row_bytes, c0, r1, src, k, xr, yr, steps);
      case 4: return Tile<4>(type, w, row_bytes, c0, r1, src, k, xr, yr, steps);
      case 5: return Tile<5>(type, w, row_bytes, c0, r1, src, k, xr, yr, steps);
      default: return Tile<6>(type, w, row_bytes, c0, r1, src, k, xr, yr, steps);
    }
  }
};

// AVX2: one weight row's eight consecutive values per register against one activation row's;
// 3 activation rows x 4 weight rows (12 accumulators, 3 activation registers and a weight one:
// all 16). Measured on a Zen 3 against 2 x 6, 2 x 5 and 1 x 12 (f16 GEMMs alone 103-124 against
// 69-83 GFLOP/s), and with activation rows blocked to stay in L2 while every panel passes (no
// gain, as on AVX-512).
struct Avx2Kernel {
  static constexpr int kRows = 3, kCols = 4;
  static constexpr int64_t kStateFloats = kRows * kCols * 8;

  struct Panel : PanelAhead {
    const float* panel;
    LLM42_AVX2 __m256 Col(int c, int64_t s) const { return _mm256_loadu_ps(panel + (s * kCols + c) * 8); }
    static void Fetch(int64_t) {}
  };
  template <typename V>
  struct Direct : DirectRows<V, kCols> {
    LLM42_AVX2 __m256 Col(int c, int64_t s) const { return V::Load8(this->row[c], 8 * s); }
  };

  template <int R, typename Src>
  LLM42_AVX2 static void Tile(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t c0, int64_t r1,
                              const Src& src, int64_t k, const float* const* xr, float* const* yr,
                              const Steps& steps) {
    const int64_t k8 = k / 8;
    __m256 acc[R][kCols];
    StartAccumulators(steps, acc);
#pragma GCC unroll 4
    for (int64_t s = steps.s0; s < steps.s1; ++s) {
      src.Fetch(s);
      __m256 xv[R];
#pragma GCC unroll 3
      for (int r = 0; r < R; ++r) xv[r] = _mm256_loadu_ps(xr[r] + 8 * s);
#pragma GCC unroll 4
      for (int c = 0; c < kCols; ++c) {
        const __m256 wv = src.Col(c, s);
#pragma GCC unroll 3
        for (int r = 0; r < R; ++r) acc[r][c] = _mm256_fmadd_ps(wv, xv[r], acc[r][c]);
      }
    }
    if (KeepAccumulators(steps, k8, acc)) return;
    // The outputs' tree sums in registers, two rows (eight outputs) at a time, then a lone row's
    // four; whole panels without tail elements store them as they are.
    static_assert(kCols == 4, "the register epilogue reduces four columns per row");
    float tree[R][kCols];
#pragma GCC unroll 2
    for (int r = 0; r + 1 < R; r += 2) {
      const __m256 a[8] = {acc[r][0], acc[r][1], acc[r][2], acc[r][3],
                           acc[r + 1][0], acc[r + 1][1], acc[r + 1][2], acc[r + 1][3]};
      const __m256 sums = FixedTreeSum8(a);
      _mm_storeu_ps(tree[r], _mm256_castps256_ps128(sums));
      _mm_storeu_ps(tree[r + 1], _mm256_extractf128_ps(sums, 1));
    }
    if (R % 2 == 1) {
      const __m256 a[4] = {acc[R - 1][0], acc[R - 1][1], acc[R - 1][2], acc[R - 1][3]};
      _mm_storeu_ps(tree[R - 1], FixedTreeSum4(a));
    }
    const bool whole = k % 8 == 0 && c0 + kCols <= r1;
    for (int r = 0; r < R; ++r) {
      if (whole) {
        std::memcpy(yr[r] + c0, tree[r], sizeof(tree[r]));
        continue;
      }
      for (int c = 0; c < kCols && c0 + c < r1; ++c) {
        yr[r][c0 + c] = FinishRow(tree[r][c], type, w + static_cast<size_t>(c0 + c) * row_bytes, xr[r], k8, k);
      }
    }
  }

  template <typename Src>
  LLM42_AVX2 static void RunTile(int nr, GgmlType type, const uint8_t* w, size_t row_bytes, int64_t c0, int64_t r1,
                                 const Src& src, int64_t k, const float* const* xr, float* const* yr,
                                 const Steps& steps) {
    switch (nr) {
      case 1: return Tile<1>(type, w, row_bytes, c0, r1, src, k, xr, yr, steps);
      case 2: return Tile<2>(type, w, row_bytes, c0, r1, src, k, xr, yr, steps);
      default: return Tile<3>(type, w, row_bytes, c0, r1, src, k, xr, yr, steps);
    }
  }
};

// Weight panels are packed a group at a time (at most kPanelGroupBytes of them) and each group
// runs against the activation rows kRowBlock at a time, every panel of the group per block, so a
// block's rows stay in cache while the group's panels pass. A panel at a time against all the
// rows streamed the activations from memory once per panel: one Zen 3 core, 512 rows, k = 8192
// (llama-1b's down projection) 37-43 -> 60-65 GFLOP/s (256 KiB groups: 45), k = 768 ~84 either
// way, 200 rows at k = 768 80-82 -> 78.
//
// Rows longer than kChunkAbove steps (4096 values) run kChunkSteps steps (2048 values) at a time
// instead, each tile's accumulators kept between chunks (Steps), and a group is as many panels as
// have kChunkGroupBytes in one chunk (at most kPanelBufferBytes of whole panels): 1 MiB of whole
// panels was two panels at k = 14336, so every activation row streamed from memory once per 16
// weight rows. One Zen 5 core, 512 f16 rows, alternated rounds (a noisy machine): k = 14336 (an
// 8B model's down projection) 99-107 -> 131-158 GFLOP/s, k = 8192 (llama-1b's) 142-153 ->
// 137-175; 1 MiB groups or 1024-value chunks no better; k <= 4096 (185-214) as before.
constexpr int64_t kPanelGroupBytes = int64_t{1} << 20;
constexpr int64_t kRowBlock = 48;  // whole row groups of both kernels (3 and 6 rows)
constexpr int64_t kChunkAbove = 512, kChunkSteps = 256;
constexpr int64_t kChunkGroupBytes = int64_t{512} << 10;
constexpr int64_t kPanelBufferBytes = int64_t{8} << 20;

template <typename K>
void PackedGemmT(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, const float* x, int64_t k,
                 const int64_t* rows, int64_t n_rows, float* y, int64_t ldy, AlignedVector<float>& panel) {
  static_assert(kRowBlock % K::kRows == 0, "row blocks of whole row groups");
  const int64_t k8 = k / 8;
  const int64_t panel_floats = std::max<int64_t>(1, k8) * K::kCols * 8;
  constexpr auto kFloat = static_cast<int64_t>(sizeof(float));
  const bool chunked = n_rows > kRowBlock && k8 > kChunkAbove;
  const int64_t chunk = chunked ? kChunkSteps : std::max<int64_t>(1, k8);
  // One block of rows: one panel at a time, its buffer hot in L1 from one panel to the next.
  const int64_t group_panels =
      n_rows <= kRowBlock ? 1
      : chunked ? std::clamp<int64_t>(kChunkGroupBytes / (chunk * K::kCols * 8 * kFloat), 1,
                                      kPanelBufferBytes / (panel_floats * kFloat))
                : std::max<int64_t>(1, kPanelGroupBytes / (panel_floats * kFloat));
  const int64_t group_rows = group_panels * K::kCols;
  panel.resize(static_cast<size_t>((std::min(group_rows, r1 - r0) + K::kCols - 1) / K::kCols * panel_floats));
  // Chunked: the accumulators of every row group of every row block against every panel of the group.
  const int64_t blocks = (n_rows + kRowBlock - 1) / kRowBlock, block_tiles = kRowBlock / K::kRows;
  AlignedVector<float>& state = ThreadScratch<AlignedVector<float>, struct PackedGemmState>();
  if (chunked) state.resize(static_cast<size_t>(blocks * group_panels * block_tiles * K::kStateFloats));
  typename K::Panel src;
  for (int64_t g0 = r0; g0 < r1; g0 += group_rows) {
    const int64_t g1 = std::min(r1, g0 + group_rows);
    for (int64_t s0 = 0; s0 < std::max<int64_t>(1, k8); s0 += chunk) {
      for (int64_t m0 = 0; m0 < n_rows; m0 += kRowBlock) {
        const int64_t mb = std::min(kRowBlock, n_rows - m0);
        for (int64_t c0 = g0; c0 < g1; c0 += K::kCols) {
          float* slot = panel.data() + (c0 - g0) / K::kCols * panel_floats;
          src.panel = slot;
          src.next = nullptr;
          if (m0 == 0 && s0 == 0) {  // the first row block packs each panel as it comes and asks for the next
            Pack(K::kCols, type, w, row_bytes, c0, r1, k8, slot);
            const int64_t next = c0 + K::kCols;
            if (next < r1) {
              src.next = w + static_cast<size_t>(next) * row_bytes;
              src.bytes = std::min<int64_t>(K::kCols, r1 - next) * static_cast<int64_t>(row_bytes);
              const int64_t groups = (mb + K::kRows - 1) / K::kRows;
              src.share = ((src.bytes + groups - 1) / groups + 63) & ~int64_t{63};
            }
          }
          Steps steps{s0, std::min(k8, s0 + chunk), nullptr};
          if (chunked) {
            const int64_t tile0 = (m0 / kRowBlock * group_panels + (c0 - g0) / K::kCols) * block_tiles;
            steps.state = state.data() + tile0 * K::kStateFloats;
          }
          RowGroups<K>(type, w, row_bytes, c0, r1, src, x, k, rows + m0, mb, y, ldy, steps);
        }
      }
    }
  }
}

template <typename K, typename V>
void DirectGemmT(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, const float* x, int64_t k,
                 const int64_t* rows, int64_t n_rows, float* y, int64_t ldy) {
  for (int64_t c0 = r0; c0 < r1; c0 += K::kCols) {
    typename K::template Direct<V> src;
    src.Place(w, row_bytes, c0, r1);
    RowGroups<K>(type, w, row_bytes, c0, r1, src, x, k, rows, n_rows, y, ldy, Steps{0, k / 8, nullptr});
  }
}

template <typename K>
void DirectGemmFor(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, const float* x,
                   int64_t k, const int64_t* rows, int64_t n_rows, float* y, int64_t ldy) {
  WithElementLoader(type, [&](auto l) {
    using L = decltype(l);
    if constexpr (kFloatKernels<L>) {
      DirectGemmT<K, VecOf<L>>(type, w, row_bytes, r0, r1, x, k, rows, n_rows, y, ldy);
    }
  });
}
#endif  // LLM42_X86

}  // namespace

bool PackedGemmSupports(GgmlType type) { return WithElementLoader(type, [](auto) {}); }

bool PackedGemmAvailable(bool allow_simd) {
#if LLM42_X86
  // LLM42_CPU_PACKED=off turns it off (to measure what it pays).
  static const bool has = CpuHasAvx2() &&
                          !(std::getenv("LLM42_CPU_PACKED") != nullptr && std::strcmp(std::getenv("LLM42_CPU_PACKED"), "off") == 0);
  return allow_simd && has;
#else
  (void)allow_simd;
  return false;
#endif
}

void PackedGemm(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, const float* x,
                int64_t k, const int64_t* rows, int64_t n_rows, float* y, int64_t ldy, AlignedVector<float>& panel) {
#if LLM42_X86
  if (CpuHasAvx512()) return PackedGemmT<Avx512Kernel>(type, w, row_bytes, r0, r1, x, k, rows, n_rows, y, ldy, panel);
  PackedGemmT<Avx2Kernel>(type, w, row_bytes, r0, r1, x, k, rows, n_rows, y, ldy, panel);
#else
  (void)type, (void)w, (void)row_bytes, (void)r0, (void)r1, (void)x, (void)k, (void)rows, (void)n_rows, (void)y,
      (void)ldy, (void)panel;
#endif
}

void DirectGemm(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, const float* x,
                int64_t k, const int64_t* rows, int64_t n_rows, float* y, int64_t ldy) {
#if LLM42_X86
  if (CpuHasAvx512()) return DirectGemmFor<Avx512Kernel>(type, w, row_bytes, r0, r1, x, k, rows, n_rows, y, ldy);
  DirectGemmFor<Avx2Kernel>(type, w, row_bytes, r0, r1, x, k, rows, n_rows, y, ldy);
#else
  (void)type, (void)w, (void)row_bytes, (void)r0, (void)r1, (void)x, (void)k, (void)rows, (void)n_rows, (void)y,
      (void)ldy;
#endif
}

}  // namespace llm42::internal
