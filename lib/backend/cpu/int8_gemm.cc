#include "lib/backend/cpu/int8_gemm.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <type_traits>
#include <vector>

#include "lib/backend/cpu/row_dot.h"
#include "lib/backend/cpu/simd_targets.h"
#include "lib/backend/cpu/weight_loaders.h"
#include "lib/util/thread_scratch.h"

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

// Where each of nb blocks lies in a panel (slots[b]): chain by chain (blocks b mod chains; 8 for
// fixed, 1 for fast), so that Tile, which runs the chains one after the other, reads its blocks
// in order.
void ChainSlots(int64_t nb, int chains, std::vector<int64_t>& slots) {
  slots.resize(static_cast<size_t>(nb));
  int64_t next = 0;
  for (int c = 0; c < chains; ++c) {
    for (int64_t b = c; b < nb; b += chains) slots[static_cast<size_t>(b)] = next++;
  }
}

// Weight rows c0..c0 + 15 (zeros past r1) into one panel, block b at slots[b].
template <typename QL>
void PackPanel(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t c0, int64_t r1, int64_t nb,
               const int64_t* slots, uint8_t* out) {
  std::vector<uint8_t>& unsigned_row = ThreadScratch<std::vector<uint8_t>, struct UnsignedPanelRow>();
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
      uint8_t* blk = out + slots[b] * kBlockBytes;
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
  const uint8_t* blk = panel;  // the panels' blocks in chain order (ChainSlots)
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

// Int8GemmFewRows: NW weight rows (wu: their unsigned-shifted bytes, UnsignedWeights; ws: their
// f32 block scales) against one activation panel of nb blocks, whose first `lanes` rows are
// activation rows rows[0..lanes): y[rows[i] * ldy + col + r] for weight row r. The definition's
// eight chains one after the other (blocks c, c + 8, ... for chain c), each block's panel groups
// loaded once for the NW weight rows, then the tree lane by lane.
template <int NW>
LLM42_VNNI512 void FewRowsTile(const uint8_t* const* wu, const float* const* ws, const uint8_t* panel, int64_t nb,
                               const int64_t* rows, int64_t lanes, float* y, int64_t ldy, int64_t col) {
  __m512 chains[8][NW];
  for (int c = 0; c < 8; ++c) {
    __m512 acc[NW];
#pragma GCC unroll 4
    for (int r = 0; r < NW; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t b = c; b < nb; b += 8) {
      const uint8_t* pb = panel + b * kActivationPanelBlockBytes;
      __m512i a[8];
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) a[g] = _mm512_load_si512(pb + g * kGroupBytes);
      const __m512i bias = _mm512_load_si512(pb + 8 * kGroupBytes);
      const __m512 d = _mm512_load_ps(pb + 9 * kGroupBytes);
#pragma GCC unroll 4
      for (int r = 0; r < NW; ++r) {
        __m512i sum = bias;
#pragma GCC unroll 8
        for (int g = 0; g < 8; ++g) {
          int32_t four;
          std::memcpy(&four, wu[r] + 32 * b + 4 * g, sizeof(four));
          sum = _mm512_dpbusd_epi32(sum, _mm512_set1_epi32(four), a[g]);
        }
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(d, _mm512_set1_ps(ws[r][b])), acc[r]);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < NW; ++r) chains[c][r] = acc[r];
  }
  for (int r = 0; r < NW; ++r) {
    const auto& C = chains;
    const __m512 h0 = _mm512_add_ps(_mm512_add_ps(C[0][r], C[4][r]), _mm512_add_ps(C[2][r], C[6][r]));
    const __m512 h1 = _mm512_add_ps(_mm512_add_ps(C[1][r], C[5][r]), _mm512_add_ps(C[3][r], C[7][r]));
    alignas(64) float v[kPanelRows];
    _mm512_store_ps(v, _mm512_add_ps(h0, h1));
    for (int64_t i = 0; i < lanes; ++i) y[rows[i] * ldy + col + r] = v[i];
  }
}

// Weight rows per FewRowsTile call.
constexpr int kFewRowsW = 4;
using FewRowsFn = void (*)(const uint8_t* const*, const float* const*, const uint8_t*, int64_t, const int64_t*, int64_t,
                           float*, int64_t, int64_t);

// A weight row's unsigned-shifted bytes (UnsignedWeights) and f32 block scales for FewRowsTile.
template <typename QL>
LLM42_VNNI512 void PrepareFewRowsWeights(GgmlType type, const uint8_t* row, int64_t nb, uint8_t* wu, float* ws) {
  UnsignedWeights(type, row, nb, wu);
  using Block = std::conditional_t<std::is_same_v<QL, Q8_0Loader>, BlockQ8_0, BlockQ4_0>;
  const auto* blocks = reinterpret_cast<const Block*>(row);
  for (int64_t b = 0; b < nb; ++b) ws[b] = _cvtsh_ss(blocks[b].scale);
}
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
  std::vector<int64_t>& slots = ThreadScratch<std::vector<int64_t>, struct ChainSlotsScratch>();
  ChainSlots(nb, chains, slots);
  for (int64_t g0 = r0; g0 < r1; g0 += group_rows) {
    const int64_t g1 = std::min(r1, g0 + group_rows);
    for (int64_t c0 = g0; c0 < g1; c0 += kPanelRows) {
      uint8_t* dst = panel.data() + (c0 - g0) / kPanelRows * nb * kBlockBytes;
      if (type == GgmlType::kQ8_0) {
        PackPanel<Q8_0Loader>(type, w, row_bytes, c0, g1, nb, slots.data(), dst);
      } else {
        PackPanel<Q4_0Loader>(type, w, row_bytes, c0, g1, nb, slots.data(), dst);
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

int64_t ActivationPanelBytes(int64_t n_rows, int64_t k) {
  return (n_rows + kPanelRows - 1) / kPanelRows * (k / 32) * kActivationPanelBlockBytes;
}

void PackActivationPanels(const ActivationPairQ8* act, const int32_t* biases, int64_t k, const int64_t* rows,
                          int64_t n_rows, uint8_t* out) {
  const int64_t nb = k / 32, pairs = ActivationPairs(k);
  std::memset(out, 0, static_cast<size_t>(ActivationPanelBytes(n_rows, k)));
  for (int64_t i = 0; i < n_rows; ++i) {
    const ActivationPairQ8* x = act + rows[i] * pairs;
    const int64_t lane = i % kPanelRows;
    uint8_t* panel = out + i / kPanelRows * nb * kActivationPanelBlockBytes;
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* blk = panel + b * kActivationPanelBlockBytes;
      const auto f = ActivationFields(x, b);
      for (int g = 0; g < 8; ++g) std::memcpy(blk + g * kGroupBytes + 4 * lane, f.q + 4 * g, 4);
      std::memcpy(blk + 8 * kGroupBytes + 4 * lane, biases + rows[i] * nb + b, 4);
      std::memcpy(blk + 9 * kGroupBytes + 4 * lane, f.d, 4);
    }
  }
}

void Int8GemmFewRows(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1,
                     const uint8_t* panels, int64_t k, const int64_t* rows, int64_t n_rows, float* y, int64_t ldy) {
#if LLM42_X86
  const int64_t nb = k / 32, n_panels = (n_rows + kPanelRows - 1) / kPanelRows;
  AlignedVector<uint8_t>& unsigned_rows = ThreadScratch<AlignedVector<uint8_t>, struct FewRowsUnsigned>();
  std::vector<float>& scales = ThreadScratch<std::vector<float>, struct FewRowsScales>();
  unsigned_rows.resize(static_cast<size_t>(kFewRowsW * 32 * nb));
  scales.resize(static_cast<size_t>(kFewRowsW * nb));
  for (int64_t r = r0; r < r1; r += kFewRowsW) {
    const int nw = static_cast<int>(std::min<int64_t>(kFewRowsW, r1 - r));
    const uint8_t* wu[kFewRowsW];
    const float* ws[kFewRowsW];
    for (int q = 0; q < nw; ++q) {
      const uint8_t* row = w + static_cast<size_t>(r + q) * row_bytes;
      uint8_t* u = unsigned_rows.data() + q * 32 * nb;
      float* s = scales.data() + q * nb;
      (type == GgmlType::kQ8_0 ? PrepareFewRowsWeights<Q8_0Loader> : PrepareFewRowsWeights<Q4_0Loader>)(type, row, nb,
                                                                                                      u, s);
      wu[q] = u;
      ws[q] = s;
    }
    constexpr FewRowsFn kByRows[kFewRowsW + 1] = {nullptr, FewRowsTile<1>, FewRowsTile<2>, FewRowsTile<3>, FewRowsTile<4>};
    for (int64_t p = 0; p < n_panels; ++p) {
      const uint8_t* panel = panels + p * nb * kActivationPanelBlockBytes;
      const int64_t lanes = std::min<int64_t>(kPanelRows, n_rows - p * kPanelRows);
      kByRows[nw](wu, ws, panel, nb, rows + p * kPanelRows, lanes, y, ldy, r);
    }
  }
#else
  (void)type, (void)w, (void)row_bytes, (void)r0, (void)r1, (void)panels, (void)k, (void)rows, (void)n_rows, (void)y,
      (void)ldy;
#endif
}

}  // namespace llm42::internal
