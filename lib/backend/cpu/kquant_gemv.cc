#include "lib/backend/cpu/kquant_gemv.h"

#include <algorithm>
#include <type_traits>

#include "lib/backend/cpu/quant_formats.h"
#include "lib/backend/cpu/row_dot.h"
#include "lib/backend/cpu/simd_targets.h"
#include "lib/backend/cpu/weight_loaders.h"

namespace llm42::internal {
namespace {

#if LLM42_X86
// Two 32-byte pieces of the activation as one register.
LLM42_VNNI512 inline __m512i Pieces(const int8_t* lo, const int8_t* hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_load_si256(reinterpret_cast<const __m256i*>(lo))),
                            _mm256_load_si256(reinterpret_cast<const __m256i*>(hi)), 1);
}

// Bytes with bit s0 set in the low 256 bits, bit s1 in the high.
LLM42_VNNI512 inline __m512i Bits(int s0, int s1) {
  return _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << s0)), _mm256_set1_epi8(static_cast<char>(1 << s1)), 1);
}

// The activation's sums over its eight runs of 32.
LLM42_VNNI512 inline __m128i Sums32(const ActivationQ8K& a) {
  return _mm_hadd_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(a.bsums)),
                        _mm_load_si128(reinterpret_cast<const __m128i*>(a.bsums + 8)));
}

// Each kernel takes NX activation rows against one weight row: the weights are unpacked once per
// super-block for all of them (decode batches), and each activation row's arithmetic is the same
// whatever NX, so a row's result does not depend on its neighbours.

// Q4_K and Q5_K: qs bytes 32j..32j+31 hold sub-block 2j in their low nibbles and 2j + 1 in
// their high ones (Q5_K: bit s of qh[l] above element l of sub-block s); a 64-byte load is
// sub-blocks 4i, 4i + 2 (low) and 4i + 1, 4i + 3 (high).
// The 16-bit scales of half i of a Q4_K/Q5_K super-block after _mm512_packs_epi32(plo, phi):
// 128-bit lanes 0-1 hold sub-blocks 4i (four words) and 4i + 1, lanes 2-3 sub-blocks 4i + 2 and
// 4i + 3.
LLM42_VNNI512 inline __m512i PairScaleIndex(int i) {
  const short a = static_cast<short>(4 * i), b = static_cast<short>(4 * i + 1), c = static_cast<short>(4 * i + 2),
              d = static_cast<short>(4 * i + 3);
  return _mm512_set_epi16(d, d, d, d, c, c, c, c, d, d, d, d, c, c, c, c, b, b, b, b, a, a, a, a, b, b, b, b, a, a, a, a);
}

template <typename Block, int NX>
LLM42_VNNI512 void DotQ45K(const Block* w, const ActivationQ8K* const* x, int64_t k, float* out) {
  const int64_t nb = k / kSuperBlock;
  constexpr bool kFive = std::is_same_v<Block, BlockQ5_K>;
  const __m512i low4 = _mm512_set1_epi8(0x0F), sixteen = _mm512_set1_epi8(16);
  const __m512i kPairScale[2] = {PairScaleIndex(0), PairScaleIndex(1)};
  __m512 acc[NX];
  __m128 mins[NX];
  for (int j = 0; j < NX; ++j) acc[j] = _mm512_setzero_ps(), mins[j] = _mm_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const Block& blk = w[b];
    PrefetchLines<sizeof(Block)>(reinterpret_cast<const uint8_t*>(&blk) + kStreamPrefetchBytes);
    alignas(16) uint8_t sc[8], m[8];
    ScalesMinsK4(blk.scales, sc, m);
    const __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc))));
    __m512i qh = _mm512_setzero_si512();
    if constexpr (kFive) qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh)));
    __m512i isum[NX];
    for (int j = 0; j < NX; ++j) isum[j] = _mm512_setzero_si512();
    for (int i = 0; i < 2; ++i) {
      const __m512i bytes = _mm512_loadu_si512(blk.qs + 64 * i);
      __m512i lo = _mm512_and_si512(bytes, low4);
      __m512i hi = _mm512_and_si512(_mm512_srli_epi16(bytes, 4), low4);
      if constexpr (kFive) {
        lo = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(qh, Bits(4 * i, 4 * i + 2)), lo, sixteen);
        hi = _mm512_mask_add_epi8(hi, _mm512_test_epi8_mask(qh, Bits(4 * i + 1, 4 * i + 3)), hi, sixteen);
      }
      const __m512i scale = _mm512_permutexvar_epi16(kPairScale[i], sc16);
      for (int j = 0; j < NX; ++j) {
        const int8_t* q = x[j][b].q + 128 * i;
        const __m512i plo = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, Pieces(q, q + 64));
        const __m512i phi = _mm512_dpbusd_epi32(_mm512_setzero_si512(), hi, Pieces(q + 32, q + 96));
        // Each lane's sum of four products fits 16 bits (|4 * 31 * 128| < 2^15): packed (per 128
        // bits, four lanes of plo then four of phi) and multiplied by their scales in pairs.
        isum[j] = _mm512_dpwssd_epi32(isum[j], _mm512_packs_epi32(plo, phi), scale);
      }
    }
    // Mins: sum over sub-blocks of m[s] * (the activation's sum over it).
    const __m128i m16 = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(m)));
    const float d = HalfToFloat(blk.d), dmin = HalfToFloat(blk.dmin);
    for (int j = 0; j < NX; ++j) {
      const ActivationQ8K& a = x[j][b];
      acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[j]), _mm512_set1_ps(d * a.d), acc[j]);
      mins[j] = _mm_fmadd_ps(_mm_cvtepi32_ps(_mm_madd_epi16(m16, Sums32(a))), _mm_set1_ps(dmin * a.d), mins[j]);
    }
  }
  for (int j = 0; j < NX; ++j) out[j] = _mm512_reduce_add_ps(acc[j]) - (mins[j][0] + mins[j][1] + mins[j][2] + mins[j][3]);
}

// Q6_K: per half h, ql bytes 0-63 hold elements 0-63 (low nibbles) and 64-127 (high), qh byte l
// their two high bits (shifts 0, 2 for elements l, l + 32; 4, 6 for l + 64, l + 96); the
// unsigned six bits go to dpbusd and 32 times the activation's sums come off.
// The 16-bit scales of half h of a Q6_K super-block after _mm512_packs_epi32(p0, p1): 128-bit lane
// k holds four words of sub-block 8h + k (p0's lanes 4k..4k+3), then four of 8h + 4 + k (p1's).
LLM42_VNNI512 inline __m512i Q6KPairScaleIndex(int h) {
  alignas(64) int16_t idx[32];
  for (int k = 0; k < 4; ++k) {
    for (int w = 0; w < 4; ++w) {
      idx[8 * k + w] = static_cast<int16_t>(8 * h + k);
      idx[8 * k + 4 + w] = static_cast<int16_t>(8 * h + 4 + k);
    }
  }
  return _mm512_load_si512(idx);
}

template <int NX>
LLM42_VNNI512 void DotQ6K(const BlockQ6_K* w, const ActivationQ8K* const* x, int64_t k, float* out) {
  const int64_t nb = k / kSuperBlock;
  const __m512i low4 = _mm512_set1_epi8(0x0F), low2 = _mm512_set1_epi8(3);
  const __m512i kPairScale[2] = {Q6KPairScaleIndex(0), Q6KPairScaleIndex(1)};
  __m512 acc[NX];
  for (int j = 0; j < NX; ++j) acc[j] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ6_K& blk = w[b];
    PrefetchLines<sizeof(BlockQ6_K)>(reinterpret_cast<const uint8_t*>(&blk) + kStreamPrefetchBytes);
    const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)));
    const __m512i scales16 = _mm512_castsi256_si512(s16);
    __m512i isum[NX];
    for (int j = 0; j < NX; ++j) isum[j] = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = _mm512_loadu_si512(blk.ql + 64 * h);
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh + 32 * h));
      const __m512i qh2 = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
      const __m512i v0 = _mm512_or_si512(_mm512_and_si512(ql, low4),
                                         _mm512_slli_epi16(_mm512_and_si512(qh2, low2), 4));
      const __m512i v1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4),
                                         _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qh2, 4), low2), 4));
      const __m512i scale = _mm512_permutexvar_epi16(kPairScale[h], scales16);
      for (int j = 0; j < NX; ++j) {
        const int8_t* q = x[j][b].q + 128 * h;
        const __m512i p0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), v0, _mm512_load_si512(q));
        const __m512i p1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), v1, _mm512_load_si512(q + 64));
        // |4 * 63 * 128| < 2^15: packed to 16 bits and multiplied by their scales in pairs.
        isum[j] = _mm512_dpwssd_epi32(isum[j], _mm512_packs_epi32(p0, p1), scale);
      }
    }
    // The -32: 32 * sum over sub-blocks of scale * the activation's sum over it.
    const float d = HalfToFloat(blk.d);
    for (int j = 0; j < NX; ++j) {
      const ActivationQ8K& a = x[j][b];
      const __m256i off = _mm256_madd_epi16(s16, _mm256_load_si256(reinterpret_cast<const __m256i*>(a.bsums)));
      isum[j] = _mm512_sub_epi32(isum[j], _mm512_zextsi256_si512(_mm256_slli_epi32(off, 5)));
      acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[j]), _mm512_set1_ps(d * a.d), acc[j]);
    }
  }
  for (int j = 0; j < NX; ++j) out[j] = _mm512_reduce_add_ps(acc[j]);
}

// IQ4_XS: sub-block s's 16 qs bytes hold its elements 0-15 (low nibbles) and 16-31 (high), each
// an index into kIq4NlValues, looked up plus 128 (unsigned for dpbusd; 128 times the
// activation's sums come off); its scale the 6-bit (scales_l, scales_h) value minus 32.
template <int NX>
LLM42_VNNI512 void DotIq4Xs(const BlockIQ4_XS* w, const ActivationQ8K* const* x, int64_t k, float* out) {
  const int64_t nb = k / kSuperBlock;
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  alignas(16) int8_t shifted[16];
  for (int i = 0; i < 16; ++i) shifted[i] = static_cast<int8_t>(kIq4NlValues[i] + 128);
  const __m512i table = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(shifted)));
  // Lane l of half i's products takes scale 4i + l / 4.
  const __m512i spread[2] = {_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                             _mm512_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7)};
  const __m128i high_shifts = _mm_setr_epi16(0, 2, 4, 6, 8, 10, 12, 14);
  // The activation's bytes 0-15, 32-47, 64-79, 96-111 (low) and 16-31, ... (high) of 128.
  const __m512i pick_lo = _mm512_setr_epi64(0, 1, 4, 5, 8, 9, 12, 13);
  const __m512i pick_hi = _mm512_setr_epi64(2, 3, 6, 7, 10, 11, 14, 15);
  __m512 acc[NX];
  for (int j = 0; j < NX; ++j) acc[j] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockIQ4_XS& blk = w[b];
    PrefetchLines<sizeof(BlockIQ4_XS)>(reinterpret_cast<const uint8_t*>(&blk) + kStreamPrefetchBytes);
    // The eight scales: low nibbles of scales_l in order (byte s / 2, half s % 2), two bits of
    // scales_h (2s) above them, minus 32.
    const __m128i l = _mm_cvtsi32_si128(static_cast<int32_t>(Load32(blk.scales_l)));
    const __m128i nibbles = _mm_unpacklo_epi8(_mm_and_si128(l, _mm_set1_epi8(0x0F)),
                                              _mm_and_si128(_mm_srli_epi16(l, 4), _mm_set1_epi8(0x0F)));
    const __m128i high = _mm_and_si128(_mm_srlv_epi16(_mm_set1_epi16(static_cast<int16_t>(blk.scales_h)), high_shifts),
                                       _mm_set1_epi16(3));
    const __m128i ls16 = _mm_sub_epi16(_mm_or_si128(_mm_cvtepu8_epi16(nibbles), _mm_slli_epi16(high, 4)), _mm_set1_epi16(32));
    const __m512i ls = _mm512_castsi256_si512(_mm256_cvtepi16_epi32(ls16));
    __m512i isum[NX];
    for (int j = 0; j < NX; ++j) isum[j] = _mm512_setzero_si512();
    for (int i = 0; i < 2; ++i) {
      const __m512i bytes = _mm512_loadu_si512(blk.qs + 64 * i);
      const __m512i lo = _mm512_shuffle_epi8(table, _mm512_and_si512(bytes, low4));
      const __m512i hi = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(bytes, 4), low4));
      const __m512i scale = _mm512_permutexvar_epi32(spread[i], ls);
      for (int j = 0; j < NX; ++j) {
        const int8_t* q = x[j][b].q + 128 * i;
        const __m512i x0 = _mm512_load_si512(q), x1 = _mm512_load_si512(q + 64);
        __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, _mm512_permutex2var_epi64(x0, pick_lo, x1));
        p = _mm512_dpbusd_epi32(p, hi, _mm512_permutex2var_epi64(x0, pick_hi, x1));
        isum[j] = _mm512_add_epi32(isum[j], _mm512_mullo_epi32(p, scale));
      }
    }
    const float d = HalfToFloat(blk.d);
    for (int j = 0; j < NX; ++j) {
      const ActivationQ8K& a = x[j][b];
      // The +128: 128 * sum over sub-blocks of scale * the activation's sum over it.
      const __m128i off = _mm_madd_epi16(ls16, Sums32(a));
      isum[j] = _mm512_sub_epi32(isum[j], _mm512_zextsi128_si512(_mm_slli_epi32(off, 7)));
      acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[j]), _mm512_set1_ps(d * a.d), acc[j]);
    }
  }
  for (int j = 0; j < NX; ++j) out[j] = _mm512_reduce_add_ps(acc[j]);
}

// MXFP4: a block's 16 qs bytes hold its elements 0-15 (low nibbles) and 16-31 (high), each an
// index into kMxfp4Values (indices 8-15 the negative values): their magnitudes go to dpbusd as
// unsigned bytes against the activation bytes negated where the weight is negative, so the
// products are the signed ones with no offset to take off (|q| <= 127: no negation overflows).
// Blocks of 32 go two to a register (one 64-byte piece of an activation record), each with its
// E8M0 scale times the activation's in f32 lanes; an activation record of 256 holds eight blocks.
template <int NX>
LLM42_VNNI512 void DotMxfp4(const BlockMXFP4* w, const ActivationQ8K* const* x, int64_t k, float* out) {
  const int64_t nb = k / 32;
  const __m512i low4 = _mm512_set1_epi8(0x0F), sign = _mm512_set1_epi8(8);
  alignas(16) int8_t magnitudes[16];
  for (int i = 0; i < 16; ++i) magnitudes[i] = static_cast<int8_t>(kMxfp4Values[i] < 0 ? -kMxfp4Values[i] : kMxfp4Values[i]);
  const __m512i table = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(magnitudes)));
  // [lo(b), hi(b), lo(b + 1), hi(b + 1)]: the second and fourth copies shifted right by 4.
  const __m512i shifts = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
  __m512 acc[NX];
  for (int j = 0; j < NX; ++j) acc[j] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; b += 2) {
    const bool pair = b + 1 < nb;  // an odd count's last block alone (its activation half zeros)
    const BlockMXFP4& b0 = w[b];
    const BlockMXFP4& b1 = w[pair ? b + 1 : b];
    PrefetchLines<2 * sizeof(BlockMXFP4)>(reinterpret_cast<const uint8_t*>(&b0) + kStreamPrefetchBytes);
    const __m256i q0 = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b0.qs)));
    const __m256i q1 = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b1.qs)));
    const __m512i idx = _mm512_and_si512(
        _mm512_srlv_epi64(_mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1), shifts), low4);
    const __m512i values = _mm512_shuffle_epi8(table, idx);
    const __mmask64 negative = _mm512_test_epi8_mask(idx, sign);
    const __m512 scales = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(E8M0Half(b0.e)),
                                               _mm512_set1_ps(pair ? E8M0Half(b1.e) : 0.0f));
    const int64_t sub = b % 8;  // the pair's place in its activation record
    for (int j = 0; j < NX; ++j) {
      const ActivationQ8K& a = x[j][b / 8];
      const __m512i xq = pair ? _mm512_load_si512(a.q + 32 * sub)
                              : _mm512_zextsi256_si512(_mm256_load_si256(reinterpret_cast<const __m256i*>(a.q + 32 * sub)));
      const __m512i signed_x = _mm512_mask_sub_epi8(xq, negative, _mm512_setzero_si512(), xq);
      const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), values, signed_x);
      acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(scales, _mm512_set1_ps(a.d)), acc[j]);
    }
  }
  for (int j = 0; j < NX; ++j) out[j] = _mm512_reduce_add_ps(acc[j]);
}

// One record of 256 activation values.
LLM42_VNNI512 void QuantizeRecordQ8K(const float* xb, ActivationQ8K& o) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF);
  __m512 amax = _mm512_setzero_ps();
  for (int i = 0; i < 16; ++i) {
    const __m512 v = _mm512_loadu_ps(xb + 16 * i);
    amax = _mm512_max_ps(_mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v), abs_mask)), amax);
  }
  const float d = _mm512_reduce_max_ps(amax) / 127.0f;
  const __m512 inv = _mm512_set1_ps(d > 0 ? 1.0f / d : 0.0f);
  o.d = d;
  for (int i = 0; i < 16; ++i) {
    // |x / d| <= 127 (up to a rounding of the product): no saturation but for NaN.
    const __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xb + 16 * i), inv));
    _mm_store_si128(reinterpret_cast<__m128i*>(o.q + 16 * i), _mm512_cvtsepi32_epi8(q));
    o.bsums[i] = static_cast<int16_t>(_mm512_reduce_add_epi32(q));
  }
}

LLM42_VNNI512 void QuantizeQ8KVnni(const float* x, int64_t k, ActivationQ8K* out) {
  const int64_t full = k / kSuperBlock;
  for (int64_t b = 0; b < full; ++b) QuantizeRecordQ8K(x + b * kSuperBlock, out[b]);
  if (k % kSuperBlock != 0) {  // a last, partial record: its values, then zeros
    alignas(64) float tail[kSuperBlock] = {};
    std::copy_n(x + full * kSuperBlock, k % kSuperBlock, tail);
    QuantizeRecordQ8K(tail, out[full]);
  }
}

// Weight rows one at a time, against the activation rows four at a time, then one by one.
// Dot4 and Dot1 take the row's length k.
template <typename Block, void (*Dot4)(const Block*, const ActivationQ8K* const*, int64_t, float*),
          void (*Dot1)(const Block*, const ActivationQ8K* const*, int64_t, float*)>
LLM42_VNNI512 void Rows(const uint8_t* w, size_t row_bytes, int64_t n_rows, const ActivationQ8K* const* x, int64_t n_x,
                        int64_t k, float* const* out) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const auto* row = reinterpret_cast<const Block*>(w + static_cast<size_t>(r) * row_bytes);
    int64_t j = 0;
    for (; j + 4 <= n_x; j += 4) {
      float y[4];
      Dot4(row, x + j, k, y);
      for (int i = 0; i < 4; ++i) out[j + i][r] = y[i];
    }
    for (; j < n_x; ++j) Dot1(row, x + j, k, &out[j][r]);
  }
}
#endif

}  // namespace

bool KQuantGemvAvailable(GgmlType type, bool allow_simd) {
  return allow_simd &&
         (type == GgmlType::kQ4_K || type == GgmlType::kQ5_K || type == GgmlType::kQ6_K || type == GgmlType::kIQ4_XS ||
          type == GgmlType::kMXFP4) &&
         CpuHasVnni512();
}

void QuantizeQ8K(const float* x, int64_t k, ActivationQ8K* out) {
#if LLM42_X86
  QuantizeQ8KVnni(x, k, out);
#else
  (void)x, (void)k, (void)out;
#endif
}

void KQuantGemv(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t n_rows, const ActivationQ8K* const* x,
                int64_t n_x, int64_t k, float* const* out) {
#if LLM42_X86
  switch (type) {
    case GgmlType::kQ4_K:
      return Rows<BlockQ4_K, DotQ45K<BlockQ4_K, 4>, DotQ45K<BlockQ4_K, 1>>(w, row_bytes, n_rows, x, n_x, k, out);
    case GgmlType::kQ5_K:
      return Rows<BlockQ5_K, DotQ45K<BlockQ5_K, 4>, DotQ45K<BlockQ5_K, 1>>(w, row_bytes, n_rows, x, n_x, k, out);
    case GgmlType::kQ6_K: return Rows<BlockQ6_K, DotQ6K<4>, DotQ6K<1>>(w, row_bytes, n_rows, x, n_x, k, out);
    case GgmlType::kIQ4_XS: return Rows<BlockIQ4_XS, DotIq4Xs<4>, DotIq4Xs<1>>(w, row_bytes, n_rows, x, n_x, k, out);
    case GgmlType::kMXFP4: return Rows<BlockMXFP4, DotMxfp4<4>, DotMxfp4<1>>(w, row_bytes, n_rows, x, n_x, k, out);
    default: return;
  }
#else
  (void)type, (void)w, (void)row_bytes, (void)n_rows, (void)x, (void)n_x, (void)k, (void)out;
#endif
}

}  // namespace llm42::internal
