#ifndef LLM42_NUMERICS_PORTABLE_MATH_H_
#define LLM42_NUMERICS_PORTABLE_MATH_H_

#include <bit>
#include <cstddef>
#include <cstdint>

#include "lib/numerics/portable_exp_log.h"

namespace llm42 {

// exp, log, sin and cos with one fixed sequence of IEEE operations (range reduction, then a
// Horner polynomial), so their bits are the same on every x86-64 and every build.
//
// Why not libm: glibc picks an FMA or a non-FMA implementation of exp, log, sin, cos, pow and
// their float versions by CPU at load time (and GLIBC_TUNABLES can change the pick), and the two
// differ in the last bit on about 1 input in 1500. Everything on the fixed schedule and in
// sampling must give the same bits on every machine (docs/design.md §7), so it uses these instead.
// The build compiles with -ffp-contract=off, so no multiply-add is fused behind our back.
//
// Accuracy: Exp and Log within 2 ulp of the exact result (tested against long double);
// Expf and SinCos computed in double and rounded once to float.

// PortableExp(x) and PortableLog(x) (NaN below 0, -inf at 0): portable_exp_log.h, written for
// the host and a device alike.
// base^y for base > 0, as exp(y log base).
double PortablePow(double base, double y);
void PortableSinCos(double x, double* sin_x, double* cos_x);
// tanh in double from PortableExp: (e - 1) / (e + 1) of e = exp(2|x|), the sign restored;
// +-1 from |x| >= 20 (where tanh rounds to 1 in double), NaN kept. Relative error within a few
// ulp of double, so its float rounding is the correctly rounded float but in rare ties.
double PortableTanh(double x);
// x * cap-limited: cap * tanh(x / cap), computed in double, rounded once (soft-capping).
float PortableSoftCap(float x, float cap);
// GELU's tanh form, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in double, rounded once.
float PortableGeluTanh(float x);

namespace internal {

// c[0] z^(n-1) + ... + c[n-1], highest power first: a product then a sum per coefficient (the
// build does not fuse them). Unrolled, so the inline PortableExpf stays a straight line.
template <size_t N>
inline double Horner(const double (&c)[N], double z) {
  double p = c[0];
#pragma GCC unroll 16
  for (size_t i = 1; i < N; ++i) p = p * z + c[i];
  return p;
}

// PortableExpf's polynomial, highest power first: Taylor to r^9 (relative error below 1e-11 for
// |r| <= ln2/2). The batch forms (portable_math.cc) evaluate the same table.
inline constexpr double kExpfTaylor[] = {1.0 / 362880, 1.0 / 40320, 1.0 / 5040, 1.0 / 720, 1.0 / 120,
                                         1.0 / 24,     1.0 / 6,     0.5,        1.0,       1.0};

// a * b + c rounded once to float, from double arithmetic alone: a * b is exact in double (24 +
// 24 bits), the sum is rounded to odd (to nearest, then, where inexact and the result's last bit
// is even, one step toward the exact sum — TwoSum gives its sign), and a rounding to odd with at
// least two more bits than float's 24 rounds to the nearest float exactly as a single rounding
// would (Boldo and Melquiond, "Emulation of FMA and correctly rounded sums", 2008).
inline float FmafRoundToOdd(float af, float bf, float cf) {
  const double p = static_cast<double>(af) * bf, c = cf;
  const double s = p + c;
  const double v = s - p;
  const double err = (p - (s - v)) + (c - v);
  auto bits = std::bit_cast<uint64_t>(s);
  if (err != 0 && (bits & 1) == 0 && s - s == 0) {  // inexact, even, finite
    bits += (err > 0) == (s > 0) ? 1 : static_cast<uint64_t>(-1);
  }
  return static_cast<float>(std::bit_cast<double>(bits));
}

}  // namespace internal

// a * b + c with one rounding, the same bits on every platform: glibc's fmaf is exact (and a
// single instruction inside functions compiled for FMA); MinGW's runtime's is not, so elsewhere
// it is FmafRoundToOdd. Every scalar multiply-add of the fixed schedule goes through here.
inline float PortableFmaf(float a, float b, float c) {
#if defined(__GLIBC__)
  return __builtin_fmaf(a, b, c);
#else
  return internal::FmafRoundToOdd(a, b, c);
#endif
}

// e^x in float for the kernels (softmax, SiLU): inline and branch-light so loops stay fast.
// Range reduction x = k ln2 + r in double, a degree-9 Taylor polynomial (relative error below
// 1e-11 for |r| <= ln2/2), rounded once to float.
inline float PortableExpf(float xf) {
  if (!(xf < 88.8f)) return xf != xf ? xf : __builtin_inff();  // overflow, +inf, NaN
  if (xf < -104.0f) return 0.0f;
  const double x = xf;
  const double t = x * internal::kLog2E;
  const int64_t k = internal::RoundToInt(t);
  const auto kd = static_cast<double>(k);
  const double r = (x - kd * internal::kLn2Hi) - kd * internal::kLn2Lo;
  const double p = internal::Horner(internal::kExpfTaylor, r);
  return static_cast<float>(p * internal::Pow2(k));  // k in [-150, 129]: a normal power of two
}

// out[i] = PortableExpf(x[i] - shift) for i < n, the same bits (the subtraction in float, as a
// caller of PortableExpf would write it), four at a time on AVX2 and eight on AVX-512 (the same
// double operations lane by lane, unfused). out may be x.
void PortableExpfShifted(const float* x, float shift, float* out, int64_t n);

// PortableExpfShifted, returning the float sum of out[0, n) added one value at a time in index
// order, from 0 (softmax's denominator, as a loop over out would add it); on AVX2 the additions
// run beside the next values' exponentials.
float PortableExpfShiftedSum(const float* x, float shift, float* out, int64_t n);

// out[i] = PortableExp((x[i] - shift) / divisor) for i < n, the same bits (x[i] widened to
// double, as a caller of PortableExp would write it), four at a time on AVX2: sampling's
// weights over a whole vocabulary.
void PortableExpScaled(const float* x, double shift, double divisor, double* out, int64_t n);

}  // namespace llm42

#endif  // LLM42_NUMERICS_PORTABLE_MATH_H_
