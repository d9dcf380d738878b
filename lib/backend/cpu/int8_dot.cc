#include "lib/backend/cpu/int8_dot.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "lib/backend/cpu/fixed_tree.h"
#include "lib/backend/cpu/simd_targets.h"
#include "lib/backend/cpu/weight_loaders.h"
#include "lib/numerics/portable_math.h"
#include "lib/util/thread_scratch.h"

namespace llm42::internal {

namespace {

// A block's scale, all eight copies (o: ActivationFields of a row being quantized).
template <typename Fields>
void SetScale(const Fields& o, float d) {
  std::fill(o.d, o.d + 8, d);
}

void QuantizeActivationsPortable(const float* x, int64_t k, GgmlType type, ActivationPairQ8* out) {
  const int32_t offset = ActivationOffset(type);
  for (int64_t b = 0; b < k / 32; ++b) {
    const float* xb = x + 32 * b;
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(xb[i]));
    const float d = amax / 127.0f;
    const float inv = d > 0 ? 1.0f / d : 0.0f;
    const auto o = ActivationFields(out, b);
    SetScale(o, d);
    for (int i = 0; i < 32; ++i) o.q[i] = static_cast<int8_t>(std::lround(xb[i] * inv));
    for (int l = 0; l < 8; ++l) {
      const int8_t* q = o.q + 4 * l;
      o.bias[l] = -offset * (q[0] + q[1] + q[2] + q[3]);
    }
  }
}

#if LLM42_X86
// 16 values rounded to nearest with ties away from zero (std::lround's rule), as int32 whose
// low byte is the scalar code's int8: truncate, then, where |y| < 2^23 (the remainder
// y - trunc(y) is exact there; larger floats are integers), step away from zero where the
// remainder is at least a half. NaN, infinities and |y| >= 2^31 give INT32_MIN, whose low byte
// (0) is that of the scalar conversion's result too.
LLM42_VNNI512 inline __m512i RoundHalfAway(__m512 y) {
  const __m512i abs_bits = _mm512_set1_epi32(0x7FFFFFFF);
  const __m512i t = _mm512_cvttps_epi32(y);
  const __m512 rem = _mm512_sub_ps(y, _mm512_cvtepi32_ps(t));
  const __m512 abs_rem = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(rem), abs_bits));
  const __m512 abs_y = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(y), abs_bits));
  const __mmask16 step = _mm512_cmp_ps_mask(abs_rem, _mm512_set1_ps(0.5f), _CMP_GE_OQ) &
                         _mm512_cmp_ps_mask(abs_y, _mm512_set1_ps(0x1p23f), _CMP_LT_OQ);
  const __mmask16 negative = _mm512_cmp_ps_mask(y, _mm512_setzero_ps(), _CMP_LT_OQ);
  const __m512i up = _mm512_mask_add_epi32(t, step & ~negative, t, _mm512_set1_epi32(1));
  return _mm512_mask_sub_epi32(up, step & negative, up, _mm512_set1_epi32(1));
}

LLM42_VNNI512 void QuantizeActivationsVnni512(const float* x, int64_t k, GgmlType type, ActivationPairQ8* out) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF);
  const __m256i neg_offset = _mm256_set1_epi32(-ActivationOffset(type));
  for (int64_t b = 0; b < k / 32; ++b) {
    const __m512 lo = _mm512_loadu_ps(x + 32 * b), hi = _mm512_loadu_ps(x + 32 * b + 16);
    // max(|x|, running): a NaN |x| keeps the running value, as std::fmax does.
    __m512 amax = _mm512_max_ps(_mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(lo), abs_mask)), _mm512_setzero_ps());
    amax = _mm512_max_ps(_mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(hi), abs_mask)), amax);
    const float m = _mm512_reduce_max_ps(amax);
    const float d = m / 127.0f;
    const float inv = d > 0 ? 1.0f / d : 0.0f;
    const auto o = ActivationFields(out, b);
    SetScale(o, d);
    const __m512 vinv = _mm512_set1_ps(inv);
    const __m128i q0 = _mm512_cvtepi32_epi8(RoundHalfAway(_mm512_mul_ps(lo, vinv)));
    const __m128i q1 = _mm512_cvtepi32_epi8(RoundHalfAway(_mm512_mul_ps(hi, vinv)));
    const __m256i q = _mm256_set_m128i(q1, q0);
    _mm256_store_si256(reinterpret_cast<__m256i*>(o.q), q);
    const __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1), q);  // 4 signed values per lane
    _mm256_store_si256(reinterpret_cast<__m256i*>(o.bias), _mm256_mullo_epi32(sums, neg_offset));
  }
}

// RoundHalfAway on AVX2 (the same steps, masks as vectors).
LLM42_AVX2 inline __m256i RoundHalfAway256(__m256 y) {
  const __m256 abs_bits = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256i t = _mm256_cvttps_epi32(y);
  const __m256 abs_rem = _mm256_and_ps(_mm256_sub_ps(y, _mm256_cvtepi32_ps(t)), abs_bits);
  const __m256 step = _mm256_and_ps(_mm256_cmp_ps(abs_rem, _mm256_set1_ps(0.5f), _CMP_GE_OQ),
                                    _mm256_cmp_ps(_mm256_and_ps(y, abs_bits), _mm256_set1_ps(0x1p23f), _CMP_LT_OQ));
  // +1 where stepping up, -1 where stepping down (y < 0), 0 elsewhere.
  const __m256i away = _mm256_castps_si256(
      _mm256_blendv_ps(_mm256_castsi256_ps(_mm256_set1_epi32(1)), _mm256_castsi256_ps(_mm256_set1_epi32(-1)),
                       _mm256_cmp_ps(y, _mm256_setzero_ps(), _CMP_LT_OQ)));
  return _mm256_add_epi32(t, _mm256_and_si256(away, _mm256_castps_si256(step)));
}

// The scalar definition on AVX2: the same bits (max is exact, the product the same rounding,
// the int8 the low byte of the rounded int32, as the scalar conversion's).
LLM42_AVX2 void QuantizeActivationsAvx2(const float* x, int64_t k, GgmlType type, ActivationPairQ8* out) {
  const __m256 abs_bits = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256i low_byte = _mm256_set1_epi32(0xFF);
  const __m256i neg_offset = _mm256_set1_epi32(-ActivationOffset(type));
  for (int64_t b = 0; b < k / 32; ++b) {
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(x + 32 * b + 8 * i);
      amax = _mm256_max_ps(_mm256_and_ps(v[i], abs_bits), amax);  // a NaN |x| keeps the running value
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const float d = _mm_cvtss_f32(m) / 127.0f;
    const float inv = d > 0 ? 1.0f / d : 0.0f;
    const auto o = ActivationFields(out, b);
    SetScale(o, d);
    __m256i q[4];
    for (int i = 0; i < 4; ++i) {
      q[i] = _mm256_and_si256(RoundHalfAway256(_mm256_mul_ps(v[i], _mm256_set1_ps(inv))), low_byte);
    }
    // Low bytes in order: the packs see values 0..255 (no saturation); they interleave 128-bit
    // lanes, which the permutation undoes.
    const __m256i bytes = _mm256_packus_epi16(_mm256_packus_epi32(q[0], q[1]), _mm256_packus_epi32(q[2], q[3]));
    const __m256i qs = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_store_si256(reinterpret_cast<__m256i*>(o.q), qs);
    const __m256i sums = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), qs), _mm256_set1_epi16(1));
    _mm256_store_si256(reinterpret_cast<__m256i*>(o.bias), _mm256_mullo_epi32(sums, neg_offset));
  }
}
#endif

}  // namespace

void QuantizeActivations(const float* x, int64_t k, GgmlType type, ActivationPairQ8* out, bool allow_simd) {
  if (k / 32 % 2 != 0) {  // the last record's second half: zeros
    const auto o = ActivationFields(out, k / 32);
    std::fill(o.q, o.q + 32, int8_t{0});
    std::fill(o.bias, o.bias + 8, 0);
    SetScale(o, 0.0f);
  }
#if LLM42_X86
  if (allow_simd && CpuHasVnni512()) return QuantizeActivationsVnni512(x, k, type, out);
  if (allow_simd && CpuHasAvx2()) return QuantizeActivationsAvx2(x, k, type, out);
#endif
  QuantizeActivationsPortable(x, k, type, out);
}

namespace {

// The fixed family's definition (int8_dot.h), block by block.
template <typename QL>
float PortableFixedInt8Dot(const uint8_t* w, const ActivationPairQ8* x, int64_t k) {
  float c[8] = {};
  for (int64_t b = 0; b < k / 32; ++b) {
    const ActivationBlockQ8 xb = ActivationBlock(x, b);
    int32_t p = 0;
    for (int i = 0; i < 32; ++i) p += static_cast<int32_t>(QL::Q(w, 32 * b + i)) * xb.q[i];
    c[b % 8] = PortableFmaf(static_cast<float>(p), QL::Scale(w, b) * xb.d, c[b % 8]);
  }
  return FixedTreeSum(c);
}

template <typename QL, int NW, int NX>
void PortableFixedInt8Tile(const uint8_t* const* w, const ActivationPairQ8* const* x, int64_t k, float* out) {
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
  // AVX2 per-lane products (Int8Accumulate): maddubs of |w| by x with w's sign moved onto it.
  // The block's weights are read again for each sign (a load, not a register held: tiles of
  // several weight rows ran out of registers).
  struct Avx2Row {
    const Block* b;
    __m256i abs_w;
  };
  LLM42_AVX2 static Avx2Row PrepareAvx2(const Block& b) {
    const __m256i w = Load(b);
    return {&b, _mm256_sign_epi8(w, w)};
  }
  LLM42_AVX2 static __m256i ProductsAvx2(const Avx2Row& w, __m256i xq, const ActivationBlockQ8&,
                                         __m256i ones = _mm256_set1_epi16(1)) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(w.abs_w, _mm256_sign_epi8(xq, Load(*w.b))), ones);
  }
  // For dpbusd: weight + 128 as unsigned bytes, one block, or blocks b (low half) and b + 1.
  LLM42_VNNI512 static __m256i LoadUnsigned(const Block& b) {
    return _mm256_xor_si256(Load(b), _mm256_set1_epi8(static_cast<char>(0x80)));
  }
  LLM42_VNNI512 static __m512i LoadUnsignedPair(const Block* b) {
    const __m512i w = _mm512_inserti64x4(_mm512_castsi256_si512(Load(b[0])), Load(b[1]), 1);
    return _mm512_xor_si512(w, _mm512_set1_epi8(static_cast<char>(0x80)));
  }
};
// ggml's q4_0 layout: element j < 16 is the low nibble of q[j], j >= 16 the high nibble of
// q[j - 16]; weight = nibble - 8.
struct Q4_0Weights {
  using Block = BlockQ4_0;
  // For dpbusd and maddubs: the nibbles themselves (weight + 8), one block, or blocks b (low
  // half) and b + 1.
  LLM42_AVX2 static __m256i LoadUnsigned(const Block& b) {
    // The 16 bytes in both halves, the high half shifted right by 4 (per 32-bit lane: each
    // byte's low 4 bits become its high nibble), then both masked: 3 instructions, not 5.
    const __m256i both = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.q)));
    return _mm256_and_si256(_mm256_srlv_epi32(both, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)), _mm256_set1_epi8(0x0F));
  }
  // AVX2 per-lane products (Int8Accumulate): maddubs of the nibbles by x, plus the activation's
  // bias.
  struct Avx2Row {
    __m256i nibbles;
  };
  LLM42_AVX2 static Avx2Row PrepareAvx2(const Block& b) { return {LoadUnsigned(b)}; }
  LLM42_AVX2 static __m256i ProductsAvx2(const Avx2Row& w, __m256i xq, const ActivationBlockQ8& x,
                                         __m256i ones = _mm256_set1_epi16(1)) {
    const __m256i sums = _mm256_madd_epi16(_mm256_maddubs_epi16(w.nibbles, xq), ones);
    return _mm256_add_epi32(sums, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.bias)));
  }
  // Each block's 16 bytes twice ([q(b), q(b), q(b + 1), q(b + 1)]: two broadcast loads and an
  // insert), the second copy of each shifted right by 4, then masked: [lo(b), hi(b), lo(b + 1),
  // hi(b + 1)] in five instructions, not seven (two loads, two inserts, a shift, a mask and a
  // shuffle of halves).
  LLM42_VNNI512 static __m512i LoadUnsignedPair(const Block* b) {
    const __m256i lo = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b[0].q)));
    const __m256i hi = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b[1].q)));
    const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    return _mm512_and_si512(_mm512_srlv_epi64(z, _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4)), _mm512_set1_epi8(0x0F));
  }
};

// Block b of NW weight rows against NX activation rows, into one accumulator per pair. Lane l
// of the integer products (W::ProductsAvx2) is elements 4l..4l+3: for q8_0 maddubs multiplies |w|
// (unsigned, <= 128) by x with w's sign moved onto it (|x| <= 127) and sums adjacent pairs (at
// most 32512: no saturation), madd sums adjacent pairs of those; q4_0 feeds its nibbles
// (weight + 8, 0..15) to maddubs as they are (pairs at most 3810) and adds the activation's bias
// (int8_dot.h), as the VNNI kernels do. Exact, so any CPU's lanes agree. The weight blocks are
// prepared once, then each activation row meets them in turn (its registers live for NW products,
// not the whole block).
template <typename W, int NW, int NX>
LLM42_AVX2 __attribute__((always_inline)) inline void Int8Accumulate(const typename W::Block* const* w,
                                                                     const ActivationPairQ8* const* x, int64_t b,
                                                                     __m256i ones, __m256 (&acc)[NW][NX]) {
  typename W::Avx2Row wr[NW];
  float dw[NW];
#pragma GCC unroll 4
  for (int r = 0; r < NW; ++r) {
    wr[r] = W::PrepareAvx2(w[r][b]);
    dw[r] = _cvtsh_ss(w[r][b].scale);
  }
#pragma GCC unroll 4
  for (int j = 0; j < NX; ++j) {
    const ActivationBlockQ8 xb = ActivationBlock(x[j], b);
    const __m256i xq = _mm256_load_si256(reinterpret_cast<const __m256i*>(xb.q));
#pragma GCC unroll 4
    for (int r = 0; r < NW; ++r) {
      const __m256 p = _mm256_cvtepi32_ps(W::ProductsAvx2(wr[r], xq, xb, ones));
      acc[r][j] = _mm256_fmadd_ps(p, _mm256_set1_ps(dw[r] * xb.d), acc[r][j]);
    }
  }
}

template <int NW, int NX>
LLM42_AVX2 __attribute__((always_inline)) inline void ZeroAccumulators(__m256 (&acc)[NW][NX]) {
#pragma GCC unroll 4
  for (int r = 0; r < NW; ++r) {
#pragma GCC unroll 4
    for (int j = 0; j < NX; ++j) acc[r][j] = _mm256_setzero_ps();
  }
}

// fast: NACC accumulators per pair over blocks b mod NACC (eight per-lane partial sums of each
// block), added in order, then the fixed tree: the fast family's own bits.
template <typename W, int NW, int NX, int NACC>
LLM42_AVX2 void Int8Tile(const uint8_t* const* w_rows, const ActivationPairQ8* const* x, int64_t k, float* out) {
  const typename W::Block* w[NW];
  for (int r = 0; r < NW; ++r) w[r] = reinterpret_cast<const typename W::Block*>(w_rows[r]);
  __m256 acc[NACC][NW][NX];
#pragma GCC unroll 4
  for (int a = 0; a < NACC; ++a) ZeroAccumulators(acc[a]);
  const __m256i ones = _mm256_set1_epi16(1);
  const int64_t n = k / 32;
  constexpr int64_t kSize = sizeof(typename W::Block);
  int64_t b = 0;
  for (; b + NACC <= n; b += NACC) {
#pragma GCC unroll 4
    for (int a = 0; a < NACC; ++a) {
      // One prefetch per cache line: the block that starts in its first kSize bytes asks for
      // the line kStreamPrefetchBytes on.
      if ((b + a) * kSize % 64 < kSize) {
#pragma GCC unroll 4
        for (int r = 0; r < NW; ++r) {
          _mm_prefetch(reinterpret_cast<const char*>(w[r] + b + a) + kStreamPrefetchBytes, _MM_HINT_T0);
        }
      }
      Int8Accumulate<W, NW, NX>(w, x, b + a, ones, acc[a]);
    }
  }
#pragma GCC unroll 4
  for (int a = 0; a < NACC; ++a) {
    if (b + a < n) Int8Accumulate<W, NW, NX>(w, x, b + a, ones, acc[a]);
  }
  for (int r = 0; r < NW; ++r) {
    for (int j = 0; j < NX; ++j) {
      __m256 v = acc[0][r][j];
      for (int a = 1; a < NACC; ++a) v = _mm256_add_ps(v, acc[a][r][j]);
      out[r * NX + j] = FixedTreeSum(v);
    }
  }
}

// The `one` kernel kOne over consecutive weight rows (Int8GemvFn). The wrappers below (one per
// target) inline kOne into this loop (flatten): at k = 768 a call per row cost ~6 ns of a q4_0
// row's ~40 on a Zen 3, a direct call still ~3.
template <Int8TileFn kOne>
__attribute__((always_inline)) inline void OneRowEach(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                                                      const ActivationPairQ8* x, int64_t k, float* out) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const uint8_t* row = w + static_cast<size_t>(r) * row_bytes;
    kOne(&row, &x, k, out + r);
  }
}
template <Int8TileFn kOne>
LLM42_AVX2 __attribute__((flatten)) void Int8GemvAvx2(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                                                      const ActivationPairQ8* x, int64_t k, float* out) {
  OneRowEach<kOne>(w, row_bytes, n_rows, x, k, out);
}

// Blocks b..b+7's whole integer products (the sums of W::ProductsAvx2's eight lanes), lane a =
// block b + a: three levels of horizontal adds and a swap of halves instead of a conversion and
// a fused multiply-add per block.
template <typename W>
LLM42_AVX2 __attribute__((always_inline)) inline __m256i BlockTotals8(const typename W::Block* w, const ActivationPairQ8* x, int64_t b) {
  __m256i p[8];
#pragma GCC unroll 8
  for (int a = 0; a < 8; ++a) {
    const ActivationBlockQ8 xb = ActivationBlock(x, b + a);
    p[a] = W::ProductsAvx2(W::PrepareAvx2(w[b + a]), _mm256_load_si256(reinterpret_cast<const __m256i*>(xb.q)), xb);
  }
  const __m256i q01 = _mm256_hadd_epi32(p[0], p[1]), q23 = _mm256_hadd_epi32(p[2], p[3]);
  const __m256i q45 = _mm256_hadd_epi32(p[4], p[5]), q67 = _mm256_hadd_epi32(p[6], p[7]);
  // Low halves hold blocks 0-3 (then 4-7) of lanes 0-3, high halves those of lanes 4-7.
  const __m256i lo = _mm256_hadd_epi32(q01, q23), hi = _mm256_hadd_epi32(q45, q67);
  return _mm256_add_epi32(_mm256_permute2x128_si256(lo, hi, 0x20), _mm256_permute2x128_si256(lo, hi, 0x31));
}

// f32 scales of weight blocks w[0..7].
template <typename W>
LLM42_AVX2 inline __m256 WeightScales8(const typename W::Block* w) {
  return _mm256_cvtph_ps(_mm_setr_epi16(
      static_cast<int16_t>(w[0].scale), static_cast<int16_t>(w[1].scale), static_cast<int16_t>(w[2].scale),
      static_cast<int16_t>(w[3].scale), static_cast<int16_t>(w[4].scale), static_cast<int16_t>(w[5].scale),
      static_cast<int16_t>(w[6].scale), static_cast<int16_t>(w[7].scale)));
}

// Activation row x's block scales in a row (k values), in a per-thread buffer: decode's, loaded
// by every weight row.
const float* ActivationScaleRow(const ActivationPairQ8* x, int64_t k) {
  std::vector<float>& scales = ThreadScratch<std::vector<float>, struct ActivationScales>();
  scales.resize(static_cast<size_t>(k / 32));
  for (int64_t b = 0; b < k / 32; ++b) scales[static_cast<size_t>(b)] = ActivationBlock(x, b).d;
  return scales.data();
}

// The activation scales of blocks b..b+7 (xr: the row's record b / 2), lane a = block b + a's:
// the first of each block's eight copies in the four records.
LLM42_AVX2 inline __m256 ActivationScales8(const ActivationPairQ8* xr) {
  return _mm256_setr_ps(xr[0].d[0], xr[0].d[8], xr[1].d[0], xr[1].d[8], xr[2].d[0], xr[2].d[8], xr[3].d[0], xr[3].d[8]);
}

// The fixed definition's blocks past a kernel's last group of eight, then the tree: acc holds
// the eight chains (lane c: chain c) of weight row w against activation row x. Each block's
// per-lane products (W::ProductsAvx2, exact, so any kernel's) summed across lanes, then the
// definition's fused multiply-add in scalar code: a row of 28 blocks (k = 896) has four of them.
template <typename W>
LLM42_AVX2 inline float FinishFixedInt8(__m256 acc, const uint8_t* w, const ActivationPairQ8* x, int64_t n8, int64_t n) {
  alignas(32) float c[8];
  _mm256_store_ps(c, acc);
  const auto* blocks = reinterpret_cast<const typename W::Block*>(w);
  for (int64_t b = n8; b < n; ++b) {
    const ActivationBlockQ8 xb = ActivationBlock(x, b);
    const __m256i p = W::ProductsAvx2(W::PrepareAvx2(blocks[b]), _mm256_load_si256(reinterpret_cast<const __m256i*>(xb.q)), xb);
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
    h = _mm_add_epi32(h, _mm_unpackhi_epi64(h, h));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, _MM_SHUFFLE(1, 1, 1, 1)));
    const auto total = static_cast<float>(_mm_cvtsi128_si32(h));
    c[b % 8] = PortableFmaf(total, _cvtsh_ss(blocks[b].scale) * xb.d, c[b % 8]);
  }
  return FixedTreeSum(c);
}

// The fixed definition for NW weight rows x NX activation rows on AVX2: per group of eight
// blocks each weight row's scales converted once, then per pair the eight blocks' whole integer
// products (BlockTotals8) converted and fused-multiply-added with their scales into the pair's
// eight chains (lane c: chain c). Decode (NX = 1) streams the rows: each asks for its bytes
// kStreamPrefetchBytes on, and passes x[0]'s block scales in a row (ActivationScaleRow; else
// null). FixedRows512 is the same loop on AVX-512 VNNI: a function's target decides which
// intrinsics inline into it, so the two are written out apart.
template <typename W, int NW, int NX>
LLM42_AVX2 void FixedRowsAvx2(const uint8_t* const* w_rows, const ActivationPairQ8* const* x, int64_t k, float* out,
                              const float* scales) {
  using Block = typename W::Block;
  const Block* w[NW];
  __m256 acc[NW][NX];
#pragma GCC unroll 4
  for (int r = 0; r < NW; ++r) {
    w[r] = reinterpret_cast<const Block*>(w_rows[r]);
#pragma GCC unroll 4
    for (int j = 0; j < NX; ++j) acc[r][j] = _mm256_setzero_ps();
  }
  const int64_t n = k / 32, n8 = n / 8 * 8;
  for (int64_t b = 0; b < n8; b += 8) {
    __m256 dx[NX];
#pragma GCC unroll 4
    for (int j = 0; j < NX; ++j) {
      dx[j] = scales != nullptr ? _mm256_loadu_ps(scales + b) : ActivationScales8(x[j] + b / 2);
    }
#pragma GCC unroll 4
    for (int r = 0; r < NW; ++r) {
      if constexpr (NX == 1) {
        PrefetchLines<8 * sizeof(Block)>(reinterpret_cast<const char*>(w[r] + b) + kStreamPrefetchBytes);
      }
      const __m256 ws = WeightScales8<W>(w[r] + b);
#pragma GCC unroll 4
      for (int j = 0; j < NX; ++j) {
        const __m256 t = _mm256_cvtepi32_ps(BlockTotals8<W>(w[r], x[j], b));
        acc[r][j] = _mm256_fmadd_ps(t, _mm256_mul_ps(ws, dx[j]), acc[r][j]);
      }
    }
  }
  for (int r = 0; r < NW; ++r) {
    for (int j = 0; j < NX; ++j) out[r * NX + j] = FinishFixedInt8<W>(acc[r][j], w_rows[r], x[j], n8, n);
  }
}

template <typename W, int NW, int NX>
LLM42_AVX2 void FixedTileAvx2(const uint8_t* const* w_rows, const ActivationPairQ8* const* x, int64_t k, float* out) {
  FixedRowsAvx2<W, NW, NX>(w_rows, x, k, out, nullptr);
}

// Decode rows one at a time (AVX2's 16 registers: two rows' chains and blocks spill), the
// activation's scales gathered once.
template <typename W>
LLM42_AVX2 __attribute__((flatten)) void FixedGemvAvx2(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                                                       const ActivationPairQ8* x, int64_t k, float* out) {
  const float* scales = ActivationScaleRow(x, k);
  for (int64_t r = 0; r < n_rows; ++r) {
    const uint8_t* row = w + static_cast<size_t>(r) * row_bytes;
    FixedRowsAvx2<W, 1, 1>(&row, &x, k, out + r, scales);
  }
}

// f32 weight scales of blocks b (low half) and b + 1.
template <typename W>
LLM42_VNNI512 inline __m512 WeightScalePair(const typename W::Block* b) {
  return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16(static_cast<int16_t>(b[0].scale))),
                                                 _mm_set1_epi16(static_cast<int16_t>(b[1].scale)), 1));
}

// Chain a (0: low half, 1: high half) of acc += f32(p) * s for one block b, p the per-lane
// integer products of int8_dot.h and s = f32(weight scale) * activation d.
template <typename W>
LLM42_VNNI512 inline __m256 OneBlock(const typename W::Block& w, const ActivationBlockQ8& x, __m256 acc) {
  const __m256i p = _mm256_dpbusd_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(x.bias)), W::LoadUnsigned(w),
                                        _mm256_load_si256(reinterpret_cast<const __m256i*>(x.q)));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(_cvtsh_ss(w.scale) * x.d), acc);
}

// Decode streams the weight rows from memory, and the hardware prefetchers lose track of rows
// read side by side: each row asks for its bytes this far on per weight row read at once (the
// rows are consecutive, so NW rows' reads this far on are those of the rows NW * 5 on at k =
// 768). Zen 5, one thread, 256 MB of q8_0 rows, best of five: fixed two rows at a time 10.4-10.6
// -> 24-25 GB/s with kStreamPrefetchBytes, 28-30 with twice that (q4_0 at k = 2048 7.5 -> 19 ->
// 28); two threads, llama-110m's GEMVs alone: fixed q8_0 20-21 -> 40-43 GB/s, q4_0 23-26 ->
// 36-49 (decode 154-158 -> 301-341 and 416-431 -> 562-662 tok/s).
inline constexpr int64_t kDecodeAhead = kStreamPrefetchBytes;

// Four dpbusd results' sums across lanes (block 2i's eight per-lane sums in the low half of p[i],
// block 2i + 1's in the high half): lane a = block a's total.
LLM42_VNNI512 inline __m256i LaneTotals8(const __m512i (&p)[4]) {
  // Per 128-bit quarter: p0's and p1's four lanes folded to two each, likewise p2's and p3's,
  // then [p0, p1, p2, p3] summed over the quarter.
  const __m512i u = _mm512_add_epi32(_mm512_unpacklo_epi32(p[0], p[1]), _mm512_unpackhi_epi32(p[0], p[1]));
  const __m512i v = _mm512_add_epi32(_mm512_unpacklo_epi32(p[2], p[3]), _mm512_unpackhi_epi32(p[2], p[3]));
  const __m512i q = _mm512_add_epi32(_mm512_unpacklo_epi64(u, v), _mm512_unpackhi_epi64(u, v));
  // Quarters 0 + 1 (blocks 0, 2, 4, 6) and 2 + 3 (blocks 1, 3, 5, 7), then in block order.
  const __m512i t = _mm512_add_epi32(q, _mm512_shuffle_i32x4(q, q, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm512_castsi512_si256(
      _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 0, 8, 1, 9, 2, 10, 3, 11), t));
}

// ActivationScales8 on AVX-512: two-source permutes of the records' scale fields, not eight
// inserts.
LLM42_VNNI512 inline __m256 ActivationScales8Vnni(const ActivationPairQ8* xr) {
  const __m512i pick = _mm512_setr_epi32(0, 8, 16, 24, 0, 8, 16, 24, 0, 8, 16, 24, 0, 8, 16, 24);
  const __m512 a = _mm512_permutex2var_ps(_mm512_load_ps(xr[0].d), pick, _mm512_load_ps(xr[1].d));
  const __m512 b = _mm512_permutex2var_ps(_mm512_load_ps(xr[2].d), pick, _mm512_load_ps(xr[3].d));
  return _mm256_insertf128_ps(_mm512_castps512_ps256(a), _mm512_castps512_ps128(b), 1);
}

// FixedTileAvx2 on AVX-512 VNNI: per group of eight blocks each weight row's bytes (unsigned
// shifted, four block pairs) and scales loaded once, then per pair four dpbusd with the
// activation's biases, their totals (LaneTotals8) and one fused multiply-add. Decode (NX = 1)
// prefetches kDecodeAhead per row read at once.
template <typename W, int NW, int NX>
LLM42_VNNI512 void FixedRows512(const uint8_t* const* w_rows, const ActivationPairQ8* const* x, int64_t k, float* out,
                                const float* scales) {
  using Block = typename W::Block;
  const Block* w[NW];
  __m256 acc[NW][NX];
#pragma GCC unroll 4
  for (int r = 0; r < NW; ++r) {
    w[r] = reinterpret_cast<const Block*>(w_rows[r]);
#pragma GCC unroll 4
    for (int j = 0; j < NX; ++j) acc[r][j] = _mm256_setzero_ps();
  }
  const int64_t n = k / 32, n8 = n / 8 * 8;
  for (int64_t b = 0; b < n8; b += 8) {
    __m256 dx[NX];
#pragma GCC unroll 4
    for (int j = 0; j < NX; ++j) {
      dx[j] = scales != nullptr ? _mm256_loadu_ps(scales + b) : ActivationScales8Vnni(x[j] + b / 2);
    }
#pragma GCC unroll 4
    for (int r = 0; r < NW; ++r) {
      if constexpr (NX == 1) {
        PrefetchLines<8 * sizeof(Block)>(reinterpret_cast<const char*>(w[r] + b) + kDecodeAhead * NW);
      }
      __m512i wu[4];
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) wu[i] = W::LoadUnsignedPair(w[r] + b + 2 * i);
      const __m256 ws = WeightScales8<W>(w[r] + b);
#pragma GCC unroll 4
      for (int j = 0; j < NX; ++j) {
        const ActivationPairQ8* xr = x[j] + b / 2;
        __m512i p[4];
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i) {
          p[i] = _mm512_dpbusd_epi32(_mm512_load_si512(xr[i].bias), wu[i], _mm512_load_si512(xr[i].q));
        }
        acc[r][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(LaneTotals8(p)), _mm256_mul_ps(ws, dx[j]), acc[r][j]);
      }
    }
  }
  for (int r = 0; r < NW; ++r) {
    for (int j = 0; j < NX; ++j) out[r * NX + j] = FinishFixedInt8<W>(acc[r][j], w_rows[r], x[j], n8, n);
  }
}

template <typename W, int NW, int NX>
LLM42_VNNI512 void FixedTile512(const uint8_t* const* w_rows, const ActivationPairQ8* const* x, int64_t k,
                                float* out) {
  FixedRows512<W, NW, NX>(w_rows, x, k, out, nullptr);
}

// Decode rows two at a time (two independent chains), a last odd row alone, the activation's
// scales gathered once.
template <typename W>
LLM42_VNNI512 __attribute__((flatten)) void FixedGemv512(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                                                         const ActivationPairQ8* x, int64_t k, float* out) {
  const float* scales = ActivationScaleRow(x, k);
  int64_t r = 0;
  for (; r + 2 <= n_rows; r += 2) {
    const uint8_t* rows[2] = {w + static_cast<size_t>(r) * row_bytes, w + static_cast<size_t>(r + 1) * row_bytes};
    FixedRows512<W, 2, 1>(rows, &x, k, out + r, scales);
  }
  if (r < n_rows) {
    const uint8_t* row = w + static_cast<size_t>(r) * row_bytes;
    FixedRows512<W, 1, 1>(&row, &x, k, out + r, scales);
  }
}

// acc += f32(p) * s for blocks b (low half) and b + 1 (high half).
template <typename W>
LLM42_VNNI512 inline __m512 PairBlocks(const typename W::Block* w, const ActivationPairQ8& x, __m512 acc) {
  const __m512i p = _mm512_dpbusd_epi32(_mm512_load_si512(x.bias), W::LoadUnsignedPair(w), _mm512_load_si512(x.q));
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(WeightScalePair<W>(w), _mm512_load_ps(x.d)), acc);
}

// fast decode: one weight row against one activation row, four chains (blocks b mod 4).
template <typename W>
LLM42_VNNI512 void Int8Row512Fast(const uint8_t* const* w_rows, const ActivationPairQ8* const* xs, int64_t k,
                                  float* out) {
  const auto* w = reinterpret_cast<const typename W::Block*>(w_rows[0]);
  const ActivationPairQ8* x = xs[0];
  __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  const int64_t n = k / 32;
  int64_t b = 0;
  for (; b + 4 <= n; b += 4) {
    PrefetchLines<4 * sizeof(typename W::Block)>(reinterpret_cast<const char*>(w + b) + kDecodeAhead);
    acc[0] = PairBlocks<W>(w + b, x[b / 2], acc[0]);
    acc[1] = PairBlocks<W>(w + b + 2, x[b / 2 + 1], acc[1]);
  }
  if (b + 2 <= n) {
    acc[0] = PairBlocks<W>(w + b, x[b / 2], acc[0]);
    b += 2;
  }
  const __m512 sum = _mm512_add_ps(acc[0], acc[1]);
  __m256 a0 = _mm512_castps512_ps256(sum);
  if (b < n) a0 = OneBlock<W>(w[b], ActivationBlock(x, b), a0);
  out[0] = FixedTreeSum(_mm256_add_ps(a0, _mm512_extractf32x8_ps(sum, 1)));
}

template <Int8TileFn kOne>
LLM42_VNNI512 __attribute__((flatten)) void Int8Gemv512(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                                                        const ActivationPairQ8* x, int64_t k, float* out) {
  OneRowEach<kOne>(w, row_bytes, n_rows, x, k, out);
}

// fixed: FixedRow512 for every shape (int8_gemm.h takes prompts); fast: its own one-row kernel
// for decode and leftover rows, groups of four activation rows the fixed arithmetic.
template <typename W>
Int8Kernels Vnni512Kernels(DotFamily family) {
  if (family == DotFamily::kFixed) {
    return {FixedTile512<W, 1, 1>, FixedTile512<W, 1, 4>, FixedTile512<W, 2, 4>, 2, 4, FixedGemv512<W>};
  }
  return {Int8Row512Fast<W>, FixedTile512<W, 1, 4>, FixedTile512<W, 2, 4>, 2, 4, Int8Gemv512<Int8Row512Fast<W>>};
}

// fixed: FixedRowAvx2 for every shape. fast: q4_0 decode is compute-bound and takes the fixed
// GEMV (eight-block totals: 1.57-1.62 -> 1.33-1.39 ns per block at k = 768 from L2 on a Zen 3,
// best of six, against the fast one-row kernel looped); q8_0's reads twice the bytes per block
// and kept up with them one block at a time (GEMVs alone, alternated, noisy: 17-24 against 17-21
// GB/s with the eight-block kernel).
template <typename W>
Int8Kernels Avx2Kernels(DotFamily family) {
  if (family == DotFamily::kFixed) {
    return {FixedTileAvx2<W, 1, 1>, FixedTileAvx2<W, 1, 4>, nullptr, 0, 0, FixedGemvAvx2<W>};
  }
  if constexpr (std::is_same_v<W, Q4_0Weights>) {
    return {Int8Tile<W, 1, 1, 4>, FixedTileAvx2<W, 1, 4>, nullptr, 0, 0, FixedGemvAvx2<W>};
  }
  return {Int8Tile<W, 1, 1, 4>, FixedTileAvx2<W, 1, 4>, nullptr, 0, 0, Int8GemvAvx2<Int8Tile<W, 1, 1, 4>>};
}
#endif  // LLM42_X86

#if LLM42_X86
template <typename W>
LLM42_VNNI512 void UnsignedWeightsT(const uint8_t* row, int64_t nb, uint8_t* out) {
  const auto* w = reinterpret_cast<const typename W::Block*>(row);
  for (int64_t b = 0; b < nb; ++b) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32 * b), W::LoadUnsigned(w[b]));
}
#endif

}  // namespace

void UnsignedWeights(GgmlType type, const uint8_t* row, int64_t nb, uint8_t* out) {
#if LLM42_X86
  if (type == GgmlType::kQ8_0) return UnsignedWeightsT<Q8_0Weights>(row, nb, out);
  UnsignedWeightsT<Q4_0Weights>(row, nb, out);
#else
  (void)type, (void)row, (void)nb, (void)out;
#endif
}

Int8Kernels SelectInt8Kernels(GgmlType type, DotFamily family, bool allow_simd) {
  if (!IsInt8Type(type)) return {};
#if LLM42_X86
  if (allow_simd && CpuHasVnni512()) {
    return type == GgmlType::kQ8_0 ? Vnni512Kernels<Q8_0Weights>(family) : Vnni512Kernels<Q4_0Weights>(family);
  }
  if (allow_simd && CpuHasAvx2()) {
    return type == GgmlType::kQ8_0 ? Avx2Kernels<Q8_0Weights>(family) : Avx2Kernels<Q4_0Weights>(family);
  }
#endif
  (void)allow_simd;
  if (family == DotFamily::kFast) return {};
  return type == GgmlType::kQ8_0 ? PortableFixedKernels<Q8_0Loader>() : PortableFixedKernels<Q4_0Loader>();
}

}  // namespace llm42::internal
