#include "lib/maker/quantizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace llm42 {
namespace {

// Nearest integer of x / d in [lo, hi] (0 where d is 0).
int Round(float x, float d, int lo, int hi) {
  if (d == 0) return std::clamp(0, lo, hi);
  return std::clamp(static_cast<int>(std::lround(x / d)), lo, hi);
}

float MaxAbs(const float* x, int n) {
  float m = 0;
  for (int i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}

// The element of a signed range whose magnitude is largest (its sign decides a symmetric scale's).
float SignedMax(const float* x, int n) {
  float m = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > std::fabs(m)) m = x[i];
  }
  return m;
}

// f16 of v, and v as the f16 rounds it (what decoding will see).
uint16_t Half(float v, float* rounded) {
  const uint16_t h = Fp32ToFp16(v);
  *rounded = Fp16ToFp32(h);
  return h;
}

// Sets nibble j of a block whose element j < half is the low nibble of p[j], else the high one of
// p[j - half] (quant_formats.h's Nibble).
void PutNibble(uint8_t* p, int j, int half, int q) {
  if (j < half) {
    p[j] = static_cast<uint8_t>((p[j] & 0xF0) | (q & 0x0F));
  } else {
    p[j - half] = static_cast<uint8_t>((p[j - half] & 0x0F) | ((q & 0x0F) << 4));
  }
}

// The nearest value of a 16-value grid (IQ4's, MXFP4's) times d; ties to the lower index.
int NearestOf(const int8_t* grid, float x, float d) {
  int best = 0;
  for (int i = 1; i < 16; ++i) {
    if (std::fabs(x - d * grid[i]) < std::fabs(x - d * grid[best])) best = i;
  }
  return best;
}
int NearestIq4(float x, float d) { return NearestOf(kIq4NlValues, x, d); }

// Unsigned sub-block codes with a scale and a minimum: scale_s = (max - min) / levels and
// min_s = min(min, 0) of each sub-block, both stored as `bits`-bit multiples of a super-block d
// and dmin; returns each element's code in q.
struct AffineCodes {
  float d = 0, dmin = 0;
  std::vector<int> sc, m, q;
};
AffineCodes Affine(const float* x, int n, int sub, int levels, int bits) {
  const int n_sub = n / sub, max_code = (1 << bits) - 1;
  std::vector<float> scales(static_cast<size_t>(n_sub)), mins(static_cast<size_t>(n_sub));
  AffineCodes c;
  for (int s = 0; s < n_sub; ++s) {
    const float* xs = x + s * sub;
    const float lo = std::min(0.0f, *std::min_element(xs, xs + sub));
    const float hi = *std::max_element(xs, xs + sub);
    scales[static_cast<size_t>(s)] = (hi - lo) / static_cast<float>(levels);
    mins[static_cast<size_t>(s)] = -lo;
  }
  const float d_raw = *std::max_element(scales.begin(), scales.end()) / static_cast<float>(max_code);
  const float dmin_raw = *std::max_element(mins.begin(), mins.end()) / static_cast<float>(max_code);
  Half(d_raw, &c.d);
  Half(dmin_raw, &c.dmin);
  c.q.resize(static_cast<size_t>(n));
  for (int s = 0; s < n_sub; ++s) {
    const int sc = std::max(Round(scales[static_cast<size_t>(s)], c.d, 0, max_code), scales[static_cast<size_t>(s)] > 0 ? 1 : 0);
    const int m = Round(mins[static_cast<size_t>(s)], c.dmin, 0, max_code);
    c.sc.push_back(sc);
    c.m.push_back(m);
    const float a = c.d * static_cast<float>(sc), off = c.dmin * static_cast<float>(m);
    for (int i = 0; i < sub; ++i) c.q[static_cast<size_t>(s * sub + i)] = Round(x[s * sub + i] + off, a, 0, levels);
  }
  return c;
}

// Q4_K/Q5_K's 12 bytes of eight 6-bit scales and mins (the inverse of ScaleMinK4).
void PackScaleMinK4(const std::vector<int>& sc, const std::vector<int>& m, uint8_t* out) {
  std::memset(out, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      out[j] = static_cast<uint8_t>(sc[static_cast<size_t>(j)]);
      out[j + 4] = static_cast<uint8_t>(m[static_cast<size_t>(j)]);
    } else {
      out[j + 4] = static_cast<uint8_t>((sc[static_cast<size_t>(j)] & 0x0F) | ((m[static_cast<size_t>(j)] & 0x0F) << 4));
      out[j - 4] = static_cast<uint8_t>(out[j - 4] | ((sc[static_cast<size_t>(j)] >> 4) << 6));
      out[j] = static_cast<uint8_t>(out[j] | ((m[static_cast<size_t>(j)] >> 4) << 6));
    }
  }
}

// Symmetric sub-block codes: scale_s = (signed max) / -low so that the largest magnitude maps to
// the code range's wider end, stored as a signed multiple of d in [-scale_max, scale_max - 1].
struct SymmetricCodes {
  float d = 0;
  std::vector<int> sc, q;
};
SymmetricCodes Symmetric(const float* x, int n, int sub, int q_lo, int q_hi, int scale_lo, int scale_hi) {
  const int n_sub = n / sub;
  std::vector<float> scales(static_cast<size_t>(n_sub));
  float amax = 0;
  for (int s = 0; s < n_sub; ++s) {
    scales[static_cast<size_t>(s)] = SignedMax(x + s * sub, sub) / static_cast<float>(q_lo);
    amax = std::max(amax, std::fabs(scales[static_cast<size_t>(s)]));
  }
  SymmetricCodes c;
  Half(amax / static_cast<float>(-scale_lo), &c.d);
  c.q.resize(static_cast<size_t>(n));
  for (int s = 0; s < n_sub; ++s) {
    const int sc = Round(scales[static_cast<size_t>(s)], c.d, scale_lo, scale_hi);
    c.sc.push_back(sc);
    const float a = c.d * static_cast<float>(sc);
    for (int i = 0; i < sub; ++i) c.q[static_cast<size_t>(s * sub + i)] = Round(x[s * sub + i], a, q_lo, q_hi);
  }
  return c;
}

void Q8_0(const float* x, BlockQ8_0* b) {
  const float d = MaxAbs(x, 32) / 127.0f;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  b->scale = Fp32ToFp16(d);
  for (int j = 0; j < 32; ++j) b->q[j] = static_cast<int8_t>(std::lround(x[j] * id));
}

void Q4_0(const float* x, BlockQ4_0* b) {  // ggml's quantize_row_q4_0_ref
  const float max = SignedMax(x, 32);
  const float d = max / -8;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  b->scale = Fp32ToFp16(d);
  for (int j = 0; j < 16; ++j) {
    const int lo = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
    const int hi = std::min(15, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 8.5f)));
    b->q[j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

// q4_1 and q5_1: weight = d * q + m over the block's range.
template <typename Block>
void MinMax(const float* x, int levels, Block* b, uint8_t* qh) {
  const float lo = *std::min_element(x, x + 32), hi = *std::max_element(x, x + 32);
  float d, m;
  b->d = Half((hi - lo) / static_cast<float>(levels), &d);
  b->m = Half(lo, &m);
  uint32_t high = 0;
  for (int j = 0; j < 32; ++j) {
    const int q = Round(x[j] - m, d, 0, levels);
    PutNibble(b->qs, j, 16, q);
    high |= static_cast<uint32_t>(q >> 4) << j;
  }
  if (qh != nullptr) std::memcpy(qh, &high, 4);
}

void Q5_0(const float* x, BlockQ5_0* b) {
  float d;
  b->d = Half(SignedMax(x, 32) / -16.0f, &d);
  uint32_t high = 0;
  for (int j = 0; j < 32; ++j) {
    const int q = Round(x[j], d, -16, 15) + 16;
    PutNibble(b->qs, j, 16, q);
    high |= static_cast<uint32_t>(q >> 4) << j;
  }
  std::memcpy(b->qh, &high, 4);
}

void Q2_K(const float* x, BlockQ2_K* b) {
  const AffineCodes c = Affine(x, 256, 16, 3, 4);
  b->d = Fp32ToFp16(c.d);
  b->dmin = Fp32ToFp16(c.dmin);
  for (int s = 0; s < 16; ++s) b->scales[s] = static_cast<uint8_t>(c.sc[static_cast<size_t>(s)] | (c.m[static_cast<size_t>(s)] << 4));
  std::memset(b->qs, 0, sizeof b->qs);
  for (int j = 0; j < 256; ++j) {
    b->qs[32 * (j / 128) + j % 32] |= static_cast<uint8_t>(c.q[static_cast<size_t>(j)] << (2 * (j % 128 / 32)));
  }
}

void Q3_K(const float* x, BlockQ3_K* b) {
  const SymmetricCodes c = Symmetric(x, 256, 16, -4, 3, -32, 31);
  b->d = Fp32ToFp16(c.d);
  std::memset(b->scales, 0, sizeof b->scales);
  for (int s = 0; s < 16; ++s) {
    const int v = c.sc[static_cast<size_t>(s)] + 32;  // 6 bits: low 4 at s (or high nibble of s - 8), high 2 at 8 + s % 4
    b->scales[s % 8] |= static_cast<uint8_t>((v & 0x0F) << (s < 8 ? 0 : 4));
    b->scales[8 + s % 4] |= static_cast<uint8_t>((v >> 4) << (2 * (s / 4)));
  }
  std::memset(b->qs, 0, sizeof b->qs);
  std::memset(b->hmask, 0, sizeof b->hmask);
  for (int j = 0; j < 256; ++j) {
    const int q = c.q[static_cast<size_t>(j)] + 4;  // 0..7: two low bits, and the high one set for q >= 0
    const int h = j / 128, t = j % 128 / 32, l = j % 32;
    b->qs[32 * h + l] |= static_cast<uint8_t>((q & 3) << (2 * t));
    b->hmask[l] |= static_cast<uint8_t>((q >> 2) << (4 * h + t));
  }
}

template <typename Block>
void KQuantScales(const AffineCodes& c, Block* b) {
  b->d = Fp32ToFp16(c.d);
  b->dmin = Fp32ToFp16(c.dmin);
  PackScaleMinK4(c.sc, c.m, b->scales);
}

void Q4_K(const float* x, BlockQ4_K* b) {
  const AffineCodes c = Affine(x, 256, 32, 15, 6);
  KQuantScales(c, b);
  for (int j = 0; j < 256; ++j) PutNibble(b->qs + 32 * (j / 64), j % 64, 32, c.q[static_cast<size_t>(j)]);
}

void Q5_K(const float* x, BlockQ5_K* b) {
  const AffineCodes c = Affine(x, 256, 32, 31, 6);
  KQuantScales(c, b);
  std::memset(b->qh, 0, sizeof b->qh);
  for (int j = 0; j < 256; ++j) {
    const int q = c.q[static_cast<size_t>(j)];
    PutNibble(b->qs + 32 * (j / 64), j % 64, 32, q);
    b->qh[j % 32] |= static_cast<uint8_t>((q >> 4) << (j / 32));
  }
}

void Q6_K(const float* x, BlockQ6_K* b) {
  const SymmetricCodes c = Symmetric(x, 256, 16, -32, 31, -128, 127);
  b->d = Fp32ToFp16(c.d);
  for (int s = 0; s < 16; ++s) b->scales[s] = static_cast<int8_t>(c.sc[static_cast<size_t>(s)]);
  std::memset(b->ql, 0, sizeof b->ql);
  std::memset(b->qh, 0, sizeof b->qh);
  for (int j = 0; j < 256; ++j) {
    const int q = c.q[static_cast<size_t>(j)] + 32;
    const int h = j / 128, t = j % 128 / 32, l = j % 32;
    b->ql[64 * h + 32 * (t % 2) + l] |= static_cast<uint8_t>((q & 0x0F) << (4 * (t / 2)));
    b->qh[32 * h + l] |= static_cast<uint8_t>((q >> 4) << (2 * t));
  }
}

void IQ4_NL(const float* x, BlockIQ4_NL* b) {
  float d;
  b->d = Half(SignedMax(x, 32) / -127.0f, &d);
  for (int j = 0; j < 32; ++j) PutNibble(b->qs, j, 16, NearestIq4(x[j], d));
}

void IQ4_XS(const float* x, BlockIQ4_XS* b) {
  float amax = 0;
  float scales[8];
  for (int s = 0; s < 8; ++s) {
    scales[s] = SignedMax(x + 32 * s, 32) / -127.0f;
    amax = std::max(amax, std::fabs(scales[s]));
  }
  float d;
  b->d = Half(amax / 32.0f, &d);
  b->scales_h = 0;
  std::memset(b->scales_l, 0, sizeof b->scales_l);
  for (int s = 0; s < 8; ++s) {
    const int ls = Round(scales[s], d, -32, 31) + 32;
    b->scales_l[s / 2] |= static_cast<uint8_t>((ls & 0x0F) << (4 * (s % 2)));
    b->scales_h = static_cast<uint16_t>(b->scales_h | ((ls >> 4) << (2 * s)));
    const float a = d * static_cast<float>(ls - 32);
    for (int j = 0; j < 32; ++j) PutNibble(b->qs + 16 * s, j, 16, NearestIq4(x[32 * s + j], a));
  }
}

// ggml's quantize_row_mxfp4_ref: the scale 2^(floor(log2(amax)) - 2) as E8M0 (the exponent taken
// exactly, by frexp, not by libm's log2f), each value the nearest doubled E2M1 value at half that
// scale.
void MXFP4(const float* x, BlockMXFP4* b) {
  float amax = 0;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  int exponent = 0;
  if (amax > 0) std::frexp(amax, &exponent);  // amax = m 2^exponent, m in [0.5, 1): floor(log2) = exponent - 1
  b->e = amax > 0 ? static_cast<uint8_t>(std::clamp(exponent - 1 - 2 + 127, 0, 254)) : 0;
  const float d = E8M0Half(b->e);
  std::memset(b->qs, 0, sizeof b->qs);
  for (int j = 0; j < 32; ++j) PutNibble(b->qs, j, 16, NearestOf(kMxfp4Values, x[j], d));
}

template <typename Block, typename Fn>
std::vector<uint8_t> Blocks(std::span<const float> v, int64_t block, Fn fn) {
  const size_t n = v.size() / static_cast<size_t>(block);
  std::vector<uint8_t> out(n * sizeof(Block));
  auto* b = reinterpret_cast<Block*>(out.data());
  for (size_t i = 0; i < n; ++i) fn(v.data() + i * static_cast<size_t>(block), b + i);
  return out;
}

}  // namespace

bool CanQuantize(GgmlType type) {
  switch (type) {
    case GgmlType::kF32: case GgmlType::kF16: case GgmlType::kBF16: case GgmlType::kQ8_0: case GgmlType::kQ4_0:
    case GgmlType::kQ4_1: case GgmlType::kQ5_0: case GgmlType::kQ5_1: case GgmlType::kQ2_K: case GgmlType::kQ3_K:
    case GgmlType::kQ4_K: case GgmlType::kQ5_K: case GgmlType::kQ6_K: case GgmlType::kIQ4_NL: case GgmlType::kIQ4_XS:
    case GgmlType::kMXFP4:
      return true;
    default:
      return false;
  }
}

std::vector<uint8_t> Quantize(std::span<const float> v, GgmlType type) {
  switch (type) {
    case GgmlType::kF32: {
      std::vector<uint8_t> out(v.size() * 4);
      std::memcpy(out.data(), v.data(), out.size());
      return out;
    }
    case GgmlType::kF16:
    case GgmlType::kBF16: {
      std::vector<uint8_t> out(v.size() * 2);
      for (size_t i = 0; i < v.size(); ++i) {
        const uint16_t h = type == GgmlType::kF16 ? Fp32ToFp16(v[i]) : Fp32ToBf16(v[i]);
        std::memcpy(out.data() + 2 * i, &h, 2);
      }
      return out;
    }
    case GgmlType::kQ8_0: return Blocks<BlockQ8_0>(v, 32, Q8_0);
    case GgmlType::kQ4_0: return Blocks<BlockQ4_0>(v, 32, Q4_0);
    case GgmlType::kQ4_1: return Blocks<BlockQ4_1>(v, 32, [](const float* x, BlockQ4_1* b) { MinMax(x, 15, b, nullptr); });
    case GgmlType::kQ5_0: return Blocks<BlockQ5_0>(v, 32, Q5_0);
    case GgmlType::kQ5_1: return Blocks<BlockQ5_1>(v, 32, [](const float* x, BlockQ5_1* b) { MinMax(x, 31, b, b->qh); });
    case GgmlType::kQ2_K: return Blocks<BlockQ2_K>(v, 256, Q2_K);
    case GgmlType::kQ3_K: return Blocks<BlockQ3_K>(v, 256, Q3_K);
    case GgmlType::kQ4_K: return Blocks<BlockQ4_K>(v, 256, Q4_K);
    case GgmlType::kQ5_K: return Blocks<BlockQ5_K>(v, 256, Q5_K);
    case GgmlType::kQ6_K: return Blocks<BlockQ6_K>(v, 256, Q6_K);
    case GgmlType::kIQ4_NL: return Blocks<BlockIQ4_NL>(v, 32, IQ4_NL);
    case GgmlType::kIQ4_XS: return Blocks<BlockIQ4_XS>(v, 256, IQ4_XS);
    case GgmlType::kMXFP4: return Blocks<BlockMXFP4>(v, 32, MXFP4);
    default: return {};
  }
}

}  // namespace llm42
