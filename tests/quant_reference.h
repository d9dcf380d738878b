#ifndef LLM42_TESTS_QUANT_REFERENCE_H_
#define LLM42_TESTS_QUANT_REFERENCE_H_

// The block types' definitions written out for the tests, independently of the library's
// per-element decoders (quant_formats.h): each block walked in the order of ggml's reference
// dequantization loops (ggml-quants.c, dequantize_row_*), so an index formula of the library that
// disagrees with the layout shows here. Plus random blocks of every byte pattern (scales finite).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "lib/util/ggml_types.h"

namespace llm42::testing {

// One block of `type` at p into y (its block size of values). The products are f32 in ggml's
// order; a zero may differ in sign from the library's (which adds no -0 offsets), so compare
// with ==, not bits.
inline void ReferenceDequantizeBlock(GgmlType type, const uint8_t* p, float* y) {
  auto h = [](uint16_t v) { return Fp16ToFp32(v); };
  switch (type) {
    case GgmlType::kQ4_1: {
      const auto* b = reinterpret_cast<const BlockQ4_1*>(p);
      for (int j = 0; j < 16; ++j) {
        y[j] = static_cast<float>(b->qs[j] & 0x0F) * h(b->d) + h(b->m);
        y[j + 16] = static_cast<float>(b->qs[j] >> 4) * h(b->d) + h(b->m);
      }
      return;
    }
    case GgmlType::kQ5_0:
    case GgmlType::kQ5_1: {
      const bool q5_1 = type == GgmlType::kQ5_1;
      const uint8_t* qs = q5_1 ? reinterpret_cast<const BlockQ5_1*>(p)->qs : reinterpret_cast<const BlockQ5_0*>(p)->qs;
      const uint8_t* qh_bytes = q5_1 ? reinterpret_cast<const BlockQ5_1*>(p)->qh : reinterpret_cast<const BlockQ5_0*>(p)->qh;
      const float d = h(q5_1 ? reinterpret_cast<const BlockQ5_1*>(p)->d : reinterpret_cast<const BlockQ5_0*>(p)->d);
      const float m = q5_1 ? h(reinterpret_cast<const BlockQ5_1*>(p)->m) : 0.0f;
      uint32_t qh;
      std::memcpy(&qh, qh_bytes, 4);
      for (int j = 0; j < 16; ++j) {
        const int xh0 = static_cast<int>(((qh >> j) << 4) & 0x10);
        const int xh1 = static_cast<int>((qh >> (j + 12)) & 0x10);
        const int x0 = ((qs[j] & 0x0F) | xh0) - (q5_1 ? 0 : 16);
        const int x1 = ((qs[j] >> 4) | xh1) - (q5_1 ? 0 : 16);
        y[j] = q5_1 ? static_cast<float>(x0) * d + m : static_cast<float>(x0) * d;
        y[j + 16] = q5_1 ? static_cast<float>(x1) * d + m : static_cast<float>(x1) * d;
      }
      return;
    }
    case GgmlType::kQ2_K: {
      const auto* b = reinterpret_cast<const BlockQ2_K*>(p);
      const float d = h(b->d), dmin = h(b->dmin);
      const uint8_t* q = b->qs;
      int is = 0;
      for (int n = 0; n < 256; n += 128) {
        int shift = 0;
        for (int j = 0; j < 4; ++j) {
          for (int half = 0; half < 2; ++half) {
            const uint8_t sc = b->scales[is++];
            const float dl = d * static_cast<float>(sc & 0x0F), ml = dmin * static_cast<float>(sc >> 4);
            for (int l = 0; l < 16; ++l) *y++ = dl * static_cast<float>((q[l + 16 * half] >> shift) & 3) - ml;
          }
          shift += 2;
        }
        q += 32;
      }
      return;
    }
    case GgmlType::kQ3_K: {
      const auto* b = reinterpret_cast<const BlockQ3_K*>(p);
      // The 16 6-bit scales, unpacked as ggml does with its 32-bit masks.
      uint32_t aux[4];
      std::memcpy(aux, b->scales, 12);
      const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f, tmp = aux[2];
      aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
      aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
      aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
      aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
      int8_t scales[16];
      std::memcpy(scales, aux, 16);
      const float d_all = h(b->d);
      const uint8_t* q = b->qs;
      uint8_t m = 1;
      int is = 0;
      for (int n = 0; n < 256; n += 128) {
        int shift = 0;
        for (int j = 0; j < 4; ++j) {
          for (int half = 0; half < 2; ++half) {
            const float dl = d_all * static_cast<float>(scales[is++] - 32);
            for (int l = 16 * half; l < 16 * half + 16; ++l) {
              *y++ = dl * static_cast<float>(static_cast<int8_t>((q[l] >> shift) & 3) - ((b->hmask[l] & m) ? 0 : 4));
            }
          }
          shift += 2;
          m = static_cast<uint8_t>(m << 1);
        }
        q += 32;
      }
      return;
    }
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K: {
      const bool q5 = type == GgmlType::kQ5_K;
      const uint8_t* scales = q5 ? reinterpret_cast<const BlockQ5_K*>(p)->scales : reinterpret_cast<const BlockQ4_K*>(p)->scales;
      const uint8_t* ql = q5 ? reinterpret_cast<const BlockQ5_K*>(p)->qs : reinterpret_cast<const BlockQ4_K*>(p)->qs;
      const uint8_t* qh = q5 ? reinterpret_cast<const BlockQ5_K*>(p)->qh : nullptr;
      const float d = h(q5 ? reinterpret_cast<const BlockQ5_K*>(p)->d : reinterpret_cast<const BlockQ4_K*>(p)->d);
      const float dmin = h(q5 ? reinterpret_cast<const BlockQ5_K*>(p)->dmin : reinterpret_cast<const BlockQ4_K*>(p)->dmin);
      auto scale_min = [&](int j, uint8_t* sc, uint8_t* mn) {  // get_scale_min_k4
        if (j < 4) {
          *sc = scales[j] & 63;
          *mn = scales[j + 4] & 63;
        } else {
          *sc = static_cast<uint8_t>((scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4));
          *mn = static_cast<uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
        }
      };
      int is = 0;
      uint8_t u1 = 1, u2 = 2;
      for (int j = 0; j < 256; j += 64) {
        uint8_t sc, mn;
        scale_min(is, &sc, &mn);
        const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(mn);
        scale_min(is + 1, &sc, &mn);
        const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(mn);
        for (int l = 0; l < 32; ++l) {
          *y++ = d1 * static_cast<float>((ql[l] & 0xF) + (qh != nullptr && (qh[l] & u1) ? 16 : 0)) - m1;
        }
        for (int l = 0; l < 32; ++l) {
          *y++ = d2 * static_cast<float>((ql[l] >> 4) + (qh != nullptr && (qh[l] & u2) ? 16 : 0)) - m2;
        }
        ql += 32;
        is += 2;
        u1 = static_cast<uint8_t>(u1 << 2);
        u2 = static_cast<uint8_t>(u2 << 2);
      }
      return;
    }
    case GgmlType::kQ6_K: {
      const auto* b = reinterpret_cast<const BlockQ6_K*>(p);
      const float d = h(b->d);
      const uint8_t* ql = b->ql;
      const uint8_t* qh = b->qh;
      const int8_t* sc = b->scales;
      for (int n = 0; n < 256; n += 128) {
        for (int l = 0; l < 32; ++l) {
          const int is = l / 16;
          const int q1 = static_cast<int8_t>((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
          const int q2 = static_cast<int8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
          const int q3 = static_cast<int8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
          const int q4 = static_cast<int8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
          y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
          y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
          y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
          y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
        }
        y += 128;
        ql += 64;
        qh += 32;
        sc += 8;
      }
      return;
    }
    case GgmlType::kIQ4_NL: {
      const auto* b = reinterpret_cast<const BlockIQ4_NL*>(p);
      for (int j = 0; j < 16; ++j) {
        y[j] = h(b->d) * static_cast<float>(kIq4NlValues[b->qs[j] & 0xF]);
        y[j + 16] = h(b->d) * static_cast<float>(kIq4NlValues[b->qs[j] >> 4]);
      }
      return;
    }
    case GgmlType::kIQ4_XS: {
      const auto* b = reinterpret_cast<const BlockIQ4_XS*>(p);
      const uint8_t* qs = b->qs;
      for (int ib = 0; ib < 8; ++ib) {
        const int ls = ((b->scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((b->scales_h >> 2 * ib) & 3) << 4);
        const float dl = h(b->d) * static_cast<float>(ls - 32);
        for (int j = 0; j < 16; ++j) {
          y[j] = dl * static_cast<float>(kIq4NlValues[qs[j] & 0xf]);
          y[j + 16] = dl * static_cast<float>(kIq4NlValues[qs[j] >> 4]);
        }
        y += 32;
        qs += 16;
      }
      return;
    }
    case GgmlType::kMXFP4: {  // ggml's dequantize_row_mxfp4: E2M1 doubled, the E8M0 scale halved
      static constexpr float kE2M1Doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
      const auto* b = reinterpret_cast<const BlockMXFP4*>(p);
      const float d = std::ldexp(1.0f, static_cast<int>(b->e) - 128);
      for (int j = 0; j < 16; ++j) {
        y[j] = kE2M1Doubled[b->qs[j] & 0x0F] * d;
        y[j + 16] = kE2M1Doubled[b->qs[j] >> 4] * d;
      }
      return;
    }
    default:
      return;
  }
}

// The types above, the ones llm42 decodes through quant_formats.h.
inline const std::vector<GgmlType>& FormatTypes() {
  static const std::vector<GgmlType> types = {GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ2_K,
                                              GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K,
                                              GgmlType::kIQ4_NL, GgmlType::kIQ4_XS, GgmlType::kMXFP4};
  return types;
}

// A block scale that gives `type`'s weights magnitudes around 1 (its integers and sub-block
// scales span that many steps).
inline float UnitScale(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_1: return 0.1f;
    case GgmlType::kQ5_0: case GgmlType::kQ5_1: return 0.05f;
    case GgmlType::kQ2_K: return 0.02f;
    case GgmlType::kQ3_K: case GgmlType::kIQ4_NL: return 0.01f;
    case GgmlType::kQ4_K: return 0.001f;
    case GgmlType::kQ5_K: return 0.0005f;
    default: return 0.0003f;  // q6_k, iq4_xs
  }
}

// n_blocks blocks of `type` of random bytes, their f16 fields set to random scales in
// [scale / 2, scale) (positive; a minimum's sign comes from the layout), so every bit pattern
// of the integer fields occurs.
inline std::vector<uint8_t> RandomBlocks(GgmlType type, int64_t n_blocks, std::mt19937& rng, float scale) {
  const GgmlTypeInfo info = *GetGgmlTypeInfo(static_cast<uint32_t>(type));
  std::vector<uint8_t> bytes(static_cast<size_t>(n_blocks * info.block_bytes));
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> dist(scale / 2, scale);
  auto set = [&](uint8_t* block, size_t offset) {
    const uint16_t v = Fp32ToFp16(dist(rng));
    std::memcpy(block + offset, &v, 2);
  };
  for (int64_t i = 0; i < n_blocks; ++i) {
    uint8_t* b = bytes.data() + i * info.block_bytes;
    switch (type) {
      case GgmlType::kQ4_1: set(b, offsetof(BlockQ4_1, d)); set(b, offsetof(BlockQ4_1, m)); break;
      case GgmlType::kQ5_0: set(b, offsetof(BlockQ5_0, d)); break;
      case GgmlType::kQ5_1: set(b, offsetof(BlockQ5_1, d)); set(b, offsetof(BlockQ5_1, m)); break;
      case GgmlType::kQ2_K: set(b, offsetof(BlockQ2_K, d)); set(b, offsetof(BlockQ2_K, dmin)); break;
      case GgmlType::kQ3_K: set(b, offsetof(BlockQ3_K, d)); break;
      case GgmlType::kQ4_K: set(b, offsetof(BlockQ4_K, d)); set(b, offsetof(BlockQ4_K, dmin)); break;
      case GgmlType::kQ5_K: set(b, offsetof(BlockQ5_K, d)); set(b, offsetof(BlockQ5_K, dmin)); break;
      case GgmlType::kQ6_K: set(b, offsetof(BlockQ6_K, d)); break;
      case GgmlType::kIQ4_NL: set(b, offsetof(BlockIQ4_NL, d)); break;
      case GgmlType::kIQ4_XS: set(b, offsetof(BlockIQ4_XS, d)); break;
      case GgmlType::kMXFP4: b[0] = static_cast<uint8_t>(120 + rng() % 8); break;  // 2^-8 .. 2^-1 (never 0xFF)
      default: break;
    }
  }
  return bytes;
}

}  // namespace llm42::testing

#endif  // LLM42_TESTS_QUANT_REFERENCE_H_
