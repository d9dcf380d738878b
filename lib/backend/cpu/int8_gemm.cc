#include "lib/backend/cpu/int8_gemm.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "lib/backend/cpu/row_dot.h"
#include "lib/backend/cpu/simd_targets.h"
#include "lib/backend/cpu/weight_loaders.h"

#if defined(__x86_64__)
#define LLM42_X86 1
#endif

namespace llm42::internal {
namespace {

// One block of a 16-row panel: group g (0..7) holds values 4g..4g+3 of each row as unsigned
// bytes (weight + the type's offset), row i at bytes 4i..4i+3, then the rows' 16 f32 scales.
constexpr int kPanelRows = 16;
constexpr int64_t kGroupBytes = 64, kBlockBytes = 8 * kGroupBytes + kPanelRows * 4;
// Two panels (32 weight rows) per kernel call: 12 x 2 accumulators for 6 activation rows.
constexpr int kPanels = 2, kTileX = 6;
constexpr int64_t kPairRows = kPanels * kPanelRows;
// Packed panels per group (bytes), activation rows per block and their records' bytes at most:
// see Int8Gemm.
constexpr int64_t kPanelGroupBytes = 256 << 10, kRowBlock = 48, kRowBlockBytes = 384 << 10;

// Where block b of nb lies in a panel: chain by chain (blocks b mod chains; 8 for fixed, 1 for
// fast), so that Tile, which runs the chains one after the other, reads its blocks in order.
int64_t ChainSlot(int64_t b, int64_t nb, int chains) {
  int64_t slot = b / chains;
  for (int64_t c = 0; c < b % chains; ++c) slot += (nb - c + chains - 1) / chains;  // chain c's blocks
  return slot;
}

// Weight rows c0..c0 + 15 (zeros past r1) into one panel.
template <typename QL>
void PackPanel(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t c0, int64_t r1, int64_t nb, int chains,
               uint8_t* out) {
  thread_local std::vector<uint8_t> unsigned_row;
  unsigned_row.resize(static_cast<size_t>(32 * nb));
  for (int i = 0; i < kPanelRows; ++i) {
    const bool real = c0 + i < r1;
    const uint8_t* row = real ? w + static_cast<size_t>(c0 + i) * row_bytes : nullptr;
    if (real) {
      UnsignedWeights(type, row, nb, unsigned_row.data());
    } else {
      std::fill(unsigned_row.begin(), unsigned_row.end(), 0);
    }
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* blk = out + ChainSlot(b, nb, chains) * kBlockBytes;
      for (int g = 0; g < 8; ++g) std::memcpy(blk + g * kGroupBytes + 4 * i, &unsigned_row[32 * b + 4 * g], 4);
      const float s = real ? QL::Scale(row, b) : 0.0f;
      std::memcpy(blk + 8 * kGroupBytes + 4 * i, &s, sizeof(s));
    }
  }
}

#if LLM42_X86
// kPanels panels (consecutive in `panel`, each nb blocks) against NX activation rows: out[j]
// gets activation row j's outputs for the panels' first ncols weight rows. kChains chains over
// blocks b mod kChains one after the other (the chains are independent), each into the same
// accumulators, then for fixed's eight the tree lane by lane. fast's one chain (int8_gemm.h)
// spares the eight chains' stores and tree: 10 % of the GEMMs at k = 768.
template <int NX, int kChains>
LLM42_VNNI512 void Tile(const uint8_t* panel, int64_t nb, const int32_t* const* biases,
                        const ActivationPairQ8* const* x, float* const* out, int ncols) {
  const int64_t panel_bytes = nb * kBlockBytes;
  __m512 chains[kChains][kPanels][NX];
  const uint8_t* blk = panel;  // the panels' blocks in chain order (ChainSlot)
  for (int c = 0; c < kChains; ++c) {
    __m512 acc[kPanels][NX];
    for (int p = 0; p < kPanels; ++p) {
      for (int j = 0; j < NX; ++j) acc[p][j] = _mm512_setzero_ps();
    }
    for (int64_t b = c; b < nb; b += kChains, blk += kBlockBytes) {
      const int8_t* xq[NX];
      const float* d[NX];
      __m512i sum[kPanels][NX];
#pragma GCC unroll 6
      for (int j = 0; j < NX; ++j) {
        const auto f = ActivationFields(x[j], b);
        xq[j] = f.q;
        d[j] = f.d;
        sum[0][j] = sum[1][j] = _mm512_set1_epi32(biases[j][b]);
      }
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) {
        const __m512i w0 = _mm512_load_si512(blk + g * kGroupBytes);
        const __m512i w1 = _mm512_load_si512(blk + panel_bytes + g * kGroupBytes);
#pragma GCC unroll 6
        for (int j = 0; j < NX; ++j) {
          int32_t four;
          std::memcpy(&four, xq[j] + 4 * g, sizeof(four));
          const __m512i a = _mm512_set1_epi32(four);
          sum[0][j] = _mm512_dpbusd_epi32(sum[0][j], w0, a);
          sum[1][j] = _mm512_dpbusd_epi32(sum[1][j], w1, a);
        }
      }
      const __m512 s0 = _mm512_load_ps(blk + 8 * kGroupBytes);
      const __m512 s1 = _mm512_load_ps(blk + panel_bytes + 8 * kGroupBytes);
#pragma GCC unroll 6
      for (int j = 0; j < NX; ++j) {
        const __m512 dj = _mm512_set1_ps(*d[j]);
        acc[0][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[0][j]), _mm512_mul_ps(s0, dj), acc[0][j]);
        acc[1][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[1][j]), _mm512_mul_ps(s1, dj), acc[1][j]);
      }
    }
    for (int p = 0; p < kPanels; ++p) {
      for (int j = 0; j < NX; ++j) chains[c][p][j] = acc[p][j];
    }
  }
  for (int j = 0; j < NX; ++j) {
    for (int p = 0; p < kPanels; ++p) {
      const auto& C = chains;
      const int n = std::clamp(ncols - p * kPanelRows, 0, kPanelRows);
      const auto mask = static_cast<__mmask16>((1u << n) - 1);
      if constexpr (kChains == 1) {
        _mm512_mask_storeu_ps(out[j] + p * kPanelRows, mask, C[0][p][j]);
        continue;
      } else {
        static_assert(kChains == 8);
      }
      const __m512 h0 = _mm512_add_ps(_mm512_add_ps(C[0][p][j], C[4][p][j]), _mm512_add_ps(C[2][p][j], C[6][p][j]));
      const __m512 h1 = _mm512_add_ps(_mm512_add_ps(C[1][p][j], C[5][p][j]), _mm512_add_ps(C[3][p][j], C[7][p][j]));
      _mm512_mask_storeu_ps(out[j] + p * kPanelRows, mask, _mm512_add_ps(h0, h1));
    }
  }
}

using TileFn = void (*)(const uint8_t*, int64_t, const int32_t* const*,
                        const ActivationPairQ8* const*, float* const*, int);
template <int kChains>
constexpr TileFn kTiles[kTileX + 1] = {nullptr,           Tile<1, kChains>, Tile<2, kChains>, Tile<3, kChains>,
                                       Tile<4, kChains>, Tile<5, kChains>, Tile<6, kChains>};
#endif  // LLM42_X86

}  // namespace

bool Int8GemmAvailable(bool allow_simd) { return allow_simd && CpuHasVnni512(); }

void Int8GemmBiases(const ActivationPairQ8* row, int64_t k, int32_t* out) {
  for (int64_t b = 0; b < k / 32; ++b) {
    const auto f = ActivationFields(row, b);
    out[b] = std::accumulate(f.bias, f.bias + 8, 0);
  }
}

void Int8Gemm(DotFamily family, GgmlType type, const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1,
              const ActivationPairQ8* act, const int32_t* biases, int64_t k, const int64_t* rows, int64_t n_rows,
              float* y, int64_t ldy, AlignedVector<uint8_t>& panel) {
  const int chains = family == DotFamily::kFixed ? 8 : 1;
#if LLM42_X86
  const int64_t nb = k / 32, pairs = ActivationPairs(k);
  // Panels packed a group at a time (about kPanelGroupBytes), then activation rows a block at a time
  // against every panel of the group, so that both stay in L2: each panel pair against all 512
  // rows of a prompt streamed the activation records (1.2 MB at k = 768) from L3 once per 32
  // weight rows.
  const int64_t pair_bytes = kPanels * nb * kBlockBytes;
  const int64_t group_rows = kPairRows * std::max<int64_t>(1, kPanelGroupBytes / pair_bytes);
  // Activation rows per block: kRowBlock, or fewer where their records would pass kRowBlockBytes
  // (k over 2730: 48 rows at k = 8192 are 1.2 MB), whole tiles. llama-1b q4_0, two threads,
  // alternated, noisy: pp512 397-444 -> 415-464 tok/s (GEMMs alone 875-1129 against 1005-1110).
  const int64_t record_bytes = pairs * static_cast<int64_t>(sizeof(ActivationPairQ8));
  const int64_t row_block = std::clamp<int64_t>(kRowBlockBytes / record_bytes / kTileX * kTileX, kTileX, kRowBlock);
  panel.resize(static_cast<size_t>(std::min(group_rows, (r1 - r0 + kPairRows - 1) / kPairRows * kPairRows) /
                                   kPairRows * pair_bytes));
  for (int64_t g0 = r0; g0 < r1; g0 += group_rows) {
    const int64_t g1 = std::min(r1, g0 + group_rows);
    for (int64_t c0 = g0; c0 < g1; c0 += kPanelRows) {
      uint8_t* dst = panel.data() + (c0 - g0) / kPanelRows * nb * kBlockBytes;
      if (type == GgmlType::kQ8_0) {
        PackPanel<Q8_0Loader>(type, w, row_bytes, c0, g1, nb, chains, dst);
      } else {
        PackPanel<Q4_0Loader>(type, w, row_bytes, c0, g1, nb, chains, dst);
      }
    }
    for (int64_t m0 = 0; m0 < n_rows; m0 += row_block) {
      const int64_t m1 = std::min(n_rows, m0 + row_block);
      for (int64_t c0 = g0; c0 < g1; c0 += kPairRows) {
        const uint8_t* pair = panel.data() + (c0 - g0) / kPairRows * pair_bytes;
        const int ncols = static_cast<int>(std::min<int64_t>(kPairRows, g1 - c0));
        for (int64_t j0 = m0; j0 < m1; j0 += kTileX) {
          const int nx = static_cast<int>(std::min<int64_t>(kTileX, m1 - j0));
          const ActivationPairQ8* xs[kTileX];
          const int32_t* bs[kTileX];
          float* outs[kTileX];
          for (int j = 0; j < nx; ++j) {
            xs[j] = act + rows[j0 + j] * pairs;
            bs[j] = biases + rows[j0 + j] * nb;
            outs[j] = y + rows[j0 + j] * ldy + c0;
          }
          (chains == 8 ? kTiles<8> : kTiles<1>)[nx](pair, nb, bs, xs, outs, ncols);
        }
      }
    }
  }
#else
  (void)family, (void)type, (void)w, (void)row_bytes, (void)r0, (void)r1, (void)act, (void)biases, (void)k, (void)rows,
      (void)n_rows, (void)y, (void)ldy, (void)panel;
#endif
}

}  // namespace llm42::internal
