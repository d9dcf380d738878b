#ifndef LLM42_NUMERICS_PORTABLE_EXP_LOG_H_
#define LLM42_NUMERICS_PORTABLE_EXP_LOG_H_

// PortableExp and PortableLog (portable_math.h says why llm42 has its own), written once for the
// host and a CUDA device (host_device.h): a device computing sampling weights or logprobs gets the
// host's bits. Device code that calls them must be compiled without fused multiply-adds
// (nvcc --fmad=false), as the host build is (-ffp-contract=off).

#include <cstdint>

#include "lib/numerics/host_device.h"

namespace llm42 {
namespace internal {

// 2^e for e in [-1022, 1023], exactly.
LLM42_HD inline double Pow2(int64_t e) { return DoubleOfBits(static_cast<uint64_t>(e + 1023) << 52); }

// t rounded to the nearest integer, halves away from zero (the range reductions' k).
LLM42_HD inline int64_t RoundToInt(double t) { return static_cast<int64_t>(t < 0 ? t - 0.5 : t + 0.5); }

// The exponentials' range reduction x = k ln2 + r: k = round(x * kLog2E), and ln 2 split so that
// k * kLn2Hi is exact for |k| < 2^20 (its trailing bits are zero).
inline constexpr double kLog2E = 1.4426950408889634;
inline constexpr double kLn2Hi = 6.93147180369123816490e-01;
inline constexpr double kLn2Lo = 1.90821492927058770002e-10;
inline constexpr uint64_t kInfBits = 0x7ff0000000000000ULL;
inline constexpr uint64_t kNanBits = 0x7ff8000000000000ULL;
inline constexpr double kMinNormal = 2.2250738585072014e-308;

// PortableExp's polynomial, highest power first: Taylor to r^13, the first omitted term below
// 2^-60 of the result. A list, so that device code can hold it in a local array (a namespace
// array cannot be indexed there) and host code (the batch forms, portable_math.cc) in kExpTaylor.
#define LLM42_EXP_TAYLOR                                                                                    \
  1.0 / 6227020800, 1.0 / 479001600, 1.0 / 39916800, 1.0 / 3628800, 1.0 / 362880, 1.0 / 40320, 1.0 / 5040, \
      1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1.0, 1.0
inline constexpr double kExpTaylor[] = {LLM42_EXP_TAYLOR};

}  // namespace internal

// e^x: the range reduction, then kExpTaylor. Within 2 ulp of the exact result.
LLM42_HD inline double PortableExp(double x) {
  if (x != x) return x;
  if (x > 709.782712893384) return DoubleOfBits(internal::kInfBits);
  if (x < -745.1332191019412) return 0.0;
  const int64_t k = internal::RoundToInt(x * internal::kLog2E);
  const auto kd = static_cast<double>(k);
  const double r = (x - kd * internal::kLn2Hi) - kd * internal::kLn2Lo;  // |r| <= ln2 / 2 (a hair more at the ends)
  // Highest power first: a product then a sum per coefficient.
  const double c[] = {LLM42_EXP_TAYLOR};
  double p = c[0];
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int i = 1; i < static_cast<int>(sizeof c / sizeof c[0]); ++i) p = p * r + c[i];
  // 2^k in two factors where k leaves the normal range (subnormal results, k = 1024).
  if (k > 1023) return p * internal::Pow2(k - 1023) * internal::Pow2(1023);
  if (k < -1022) return p * internal::Pow2(k + 1022) * internal::Pow2(-1022);
  return p * internal::Pow2(k);
}

// Natural log; NaN below 0, -inf at 0. fdlibm's reduction with a Taylor series.
LLM42_HD inline double PortableLog(double x) {
  if (x != x) return x;
  if (x < 0) return DoubleOfBits(internal::kNanBits);
  if (x == 0) return -DoubleOfBits(internal::kInfBits);
  if (x == DoubleOfBits(internal::kInfBits)) return x;
  int64_t e = 0;
  if (x < internal::kMinNormal) {  // subnormal: scale into the normal range
    x *= 18014398509481984.0;      // 2^54
    e = -54;
  }
  const uint64_t bits = BitsOfDouble(x);
  e += static_cast<int64_t>((bits >> 52) & 0x7ff) - 1023;
  double m = DoubleOfBits((bits & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL);
  if (m > 1.4142135623730951) {  // m in [sqrt(1/2), sqrt(2)]
    m *= 0.5;
    ++e;
  }
  // fdlibm's reduction: log(1 + f) = f - (f^2/2 - s (f^2/2 + R(s^2))), s = f / (2 + f), with
  // R(z) = 2z/3 + 2z^2/5 + 2z^3/7 + ... (Taylor of 2 atanh(s)/s - 2, |z| <= 0.0295).
  const double f = m - 1.0;  // exact (Sterbenz)
  const double s = f / (2.0 + f);
  const double z = s * s;
  double r = 2.0 / 25;
  for (int n = 11; n >= 1; --n) r = r * z + 2.0 / (2 * n + 1);
  r *= z;
  const double hfsq = 0.5 * f * f;
  const auto ed = static_cast<double>(e);
  return ed * internal::kLn2Hi + (f - (hfsq - (s * (hfsq + r) + ed * internal::kLn2Lo)));
}

}  // namespace llm42

#endif  // LLM42_NUMERICS_PORTABLE_EXP_LOG_H_
