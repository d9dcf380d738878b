#include "lib/numerics/portable_math.h"

#include "lib/util/simd_switch.h"

#include <cstddef>
#include <limits>

#if defined(__x86_64__)
// GCC 12's AVX-512 headers build some intrinsics from _mm*_undefined_*() and then warn that the
// undefined value "may be used uninitialized" (false positives; as in simd_targets.h).
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#endif

namespace llm42 {
namespace {

using internal::Horner;
using internal::RoundToInt;
using internal::kExpTaylor;
using internal::kExpfTaylor;
using internal::kLog2E;
using internal::kLn2Hi;
using internal::kLn2Lo;
constexpr double kInf = std::numeric_limits<double>::infinity();

// Round to nearest integer (halfway away from zero) without libm.
}  // namespace

double PortableTanh(double x) {
  if (x != x) return x;
  const double a = x < 0 ? -x : x;
  if (a >= 20.0) return x < 0 ? -1.0 : 1.0;
  // Below 2^-26 tanh(a) = a to double precision; (e - 1) / (e + 1) would lose it to cancellation.
  if (a < 0x1.0p-26) return x;
  double t;
  if (a < 0.125) {
    // e - 1 cancels for small a: tanh's series instead, to a^17 (the next term is below 2^-60 of
    // the sum for a < 0.125; from there e - 1 >= 0.28 e, losing at most two bits).
    const double z = a * a;
    static constexpr double kC[] = {1.0,
                                    -1.0 / 3,
                                    2.0 / 15,
                                    -17.0 / 315,
                                    62.0 / 2835,
                                    -1382.0 / 155925,
                                    21844.0 / 6081075,
                                    -929569.0 / 638512875,
                                    6404582.0 / 10854718875};
    double p = 0;
    for (int i = 8; i >= 0; --i) p = p * z + kC[i];
    t = a * p;
  } else {
    const double e = PortableExp(2 * a);
    t = (e - 1) / (e + 1);
  }
  return x < 0 ? -t : t;
}

float PortableSoftCap(float x, float cap) {
  return static_cast<float>(static_cast<double>(cap) * PortableTanh(static_cast<double>(x) / static_cast<double>(cap)));
}

float PortableGeluTanh(float x) {
  const double d = x;
  constexpr double kSqrt2OverPi = 0.79788456080286535588;
  return static_cast<float>(0.5 * d * (1.0 + PortableTanh(kSqrt2OverPi * (d + 0.044715 * d * d * d))));
}

double PortablePow(double base, double y) { return PortableExp(y * PortableLog(base)); }

void PortableSinCos(double x, double* sin_x, double* cos_x) {
  if (x != x || x == kInf || x == -kInf) {
    *sin_x = *cos_x = std::numeric_limits<double>::quiet_NaN();
    return;
  }
  // x = k pi/2 + r with pi/2 in three parts (fdlibm's pio2_1..3); k * part1 is exact for
  // |k| < 2^20, i.e. |x| below about 1.6e6 (RoPE angles are positions times frequencies <= 1).
  const int64_t k = RoundToInt(x * 6.36619772367581382433e-01);
  const auto kd = static_cast<double>(k);
  const double r = ((x - kd * 1.57079632673412561417e+00) - kd * 6.07710050630396597660e-11) -
                   kd * 2.02226624871116645580e-21;
  const double z = r * r;
  // Taylor series on |r| <= pi/4, to r^17 and r^18: sin r = r - r z S(z), cos r = 1 - z C(z).
  static constexpr double kSin[] = {-1.0 / 355687428096000.0, 1.0 / 1307674368000.0,
                                    -1.0 / 6227020800.0,      1.0 / 39916800.0,
                                    -1.0 / 362880.0,          1.0 / 5040.0,
                                    -1.0 / 120.0,             1.0 / 6.0};
  static constexpr double kCos[] = {1.0 / 6402373705728000.0, -1.0 / 20922789888000.0,
                                    1.0 / 87178291200.0,      -1.0 / 479001600.0,
                                    1.0 / 3628800.0,          -1.0 / 40320.0,
                                    1.0 / 720.0,              -1.0 / 24.0,
                                    0.5};
  const double sin_r = r - r * z * Horner(kSin, z);
  const double cos_r = 1.0 - z * Horner(kCos, z);
  switch (k & 3) {
    case 0: *sin_x = sin_r; *cos_x = cos_r; break;
    case 1: *sin_x = cos_r; *cos_x = -sin_r; break;
    case 2: *sin_x = -sin_r; *cos_x = -cos_r; break;
    default: *sin_x = -cos_r; *cos_x = sin_r; break;
  }
}

#if defined(__x86_64__)
namespace {

// e^x on G groups of four double lanes by the scalar codes' steps (PortableExp with kExpTaylor,
// PortableExpf with kExpfTaylor before its rounding to float), for x whose 2^k is a normal power
// of two (the callers check the range): the reduction x = k ln2 + r, the Horner polynomial in
// r, times 2^k — every double operation in the scalar order, none fused. The groups run step
// by step side by side: one group alone is a ~90-cycle chain of dependent operations, and on a
// Zen 3 the FP scheduler then sat mostly idle (2.5-3.6 ns per value one group at a time with the
// polynomial loop as GCC left it, 1.8-2.2 four groups side by side, unrolled).
template <int G, size_t N>
__attribute__((target("avx2"))) inline void ExpGroups(const double (&c)[N], const __m256d (&x)[G], __m256d (&out)[G]) {
  __m256d kd[G], r[G], p[G];
#pragma GCC unroll 4
  for (int g = 0; g < G; ++g) {
    const __m256d t = _mm256_mul_pd(x[g], _mm256_set1_pd(kLog2E));
    // RoundToInt: t < 0 ? t - 0.5 : t + 0.5, truncated toward zero.
    const __m256d neg = _mm256_cmp_pd(t, _mm256_setzero_pd(), _CMP_LT_OQ);
    const __m256d half = _mm256_blendv_pd(_mm256_set1_pd(0.5), _mm256_set1_pd(-0.5), neg);
    kd[g] = _mm256_round_pd(_mm256_add_pd(t, half), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    r[g] = _mm256_sub_pd(_mm256_sub_pd(x[g], _mm256_mul_pd(kd[g], _mm256_set1_pd(kLn2Hi))),
                         _mm256_mul_pd(kd[g], _mm256_set1_pd(kLn2Lo)));
    p[g] = _mm256_set1_pd(c[0]);
  }
#pragma GCC unroll 16
  for (size_t i = 1; i < N; ++i) {
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) p[g] = _mm256_add_pd(_mm256_mul_pd(p[g], r[g]), _mm256_set1_pd(c[i]));
  }
#pragma GCC unroll 4
  for (int g = 0; g < G; ++g) {
    // 2^k: (k + 1023) << 52, k exact in int32.
    const __m256i k = _mm256_cvtepi32_epi64(_mm256_cvtpd_epi32(kd[g]));
    const __m256d pow2 = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(k, _mm256_set1_epi64x(1023)), 52));
    out[g] = _mm256_mul_pd(p[g], pow2);
  }
}

// out[i..] = f(i..) Group::kLanes values at a time while Group's range check passes, four groups
// side by side where the next 4 kLanes values all pass; returns how many were done (the caller
// takes the first value out of range by the scalar code). No instructions of its own: the
// callers (flatten) inline it and Group's target-specific steps into themselves.
template <typename Group>
inline int64_t ExpBatch(int64_t n, Group& group) {
  constexpr int kGroups = 4, W = Group::kLanes;
  int64_t i = 0;
  for (; i + W * kGroups <= n; i += W * kGroups) {
    typename Group::V v[kGroups];
    bool in = true;
#pragma GCC unroll 4
    for (int g = 0; g < kGroups; ++g) in = group.Load(i + W * g, v[g]) && in;
    if (!in) break;  // the single groups below find the first out of range
    group.template Store<kGroups>(i, v);
  }
  for (; i + W <= n; i += W) {
    typename Group::V v[1];
    if (!group.Load(i, v[0])) break;
    group.template Store<1>(i, v);
  }
  return i;
}

// PortableExpf(x[i] - shift): the subtraction in float, range [-104, 88.8) (NaN fails). With
// kSum, sum += each value in index order as it is stored (beside the next values' exponentials,
// where a pass of its own afterwards is one 3-cycle addition after another).
template <bool kSum>
struct ExpfShiftedGroup {
  using V = __m256d;
  static constexpr int kLanes = 4;
  const float* x;
  float* out;
  float shift;
  float sum = 0;
  __attribute__((target("avx2"))) bool Load(int64_t i, __m256d& v) const {
    const __m128 f = _mm_sub_ps(_mm_loadu_ps(x + i), _mm_set1_ps(shift));
    v = _mm256_cvtps_pd(f);
    return _mm_movemask_ps(_mm_and_ps(_mm_cmpge_ps(f, _mm_set1_ps(-104.0f)), _mm_cmplt_ps(f, _mm_set1_ps(88.8f)))) == 0xF;
  }
  template <int G>
  __attribute__((target("avx2"))) void Store(int64_t i, const __m256d (&v)[G]) {
    __m256d e[G];
    ExpGroups<G>(kExpfTaylor, v, e);
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      const __m128 f = _mm256_cvtpd_ps(e[g]);
      _mm_storeu_ps(out + i + 4 * g, f);
      if constexpr (kSum) {
        sum += _mm_cvtss_f32(f);
        sum += _mm_cvtss_f32(_mm_movehdup_ps(f));
        sum += _mm_cvtss_f32(_mm_movehl_ps(f, f));
        sum += _mm_cvtss_f32(_mm_shuffle_ps(f, f, _MM_SHUFFLE(3, 3, 3, 3)));
      }
    }
  }
};

// PortableExp((x[i] - shift) / divisor): range [-708, 709] (2^k a normal power of two; NaN fails).
struct ExpScaledGroup {
  using V = __m256d;
  static constexpr int kLanes = 4;
  const float* x;
  double* out;
  __m256d shift, divisor;
  __attribute__((target("avx2"))) bool Load(int64_t i, __m256d& v) const {
    v = _mm256_div_pd(_mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + i)), shift), divisor);
    const __m256d in = _mm256_and_pd(_mm256_cmp_pd(v, _mm256_set1_pd(-708.0), _CMP_GE_OQ),
                                     _mm256_cmp_pd(v, _mm256_set1_pd(709.0), _CMP_LE_OQ));
    return _mm256_movemask_pd(in) == 0xF;
  }
  template <int G>
  __attribute__((target("avx2"))) void Store(int64_t i, const __m256d (&v)[G]) const {
    __m256d e[G];
    ExpGroups<G>(kExpTaylor, v, e);
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) _mm256_storeu_pd(out + i + 4 * g, e[g]);
  }
};

// e^x on AVX-512: ExpGroups' steps on eight double lanes, written out again for this target (one
// width-generic body in GCC's vector extensions was tried: it compiled AVX2's conversions through
// the stack, 1.07 -> 1.36 ns per value).
template <int G, size_t N>
__attribute__((target("avx512f,avx512dq"))) inline void ExpGroups512(const double (&c)[N], const __m512d (&x)[G],
                                                                     __m512d (&out)[G]) {
  __m512d kd[G], r[G], p[G];
#pragma GCC unroll 4
  for (int g = 0; g < G; ++g) {
    const __m512d t = _mm512_mul_pd(x[g], _mm512_set1_pd(kLog2E));
    const __mmask8 neg = _mm512_cmp_pd_mask(t, _mm512_setzero_pd(), _CMP_LT_OQ);
    const __m512d half = _mm512_mask_blend_pd(neg, _mm512_set1_pd(0.5), _mm512_set1_pd(-0.5));
    kd[g] = _mm512_roundscale_pd(_mm512_add_pd(t, half), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    r[g] = _mm512_sub_pd(_mm512_sub_pd(x[g], _mm512_mul_pd(kd[g], _mm512_set1_pd(kLn2Hi))),
                         _mm512_mul_pd(kd[g], _mm512_set1_pd(kLn2Lo)));
    p[g] = _mm512_set1_pd(c[0]);
  }
#pragma GCC unroll 16
  for (size_t i = 1; i < N; ++i) {
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) p[g] = _mm512_add_pd(_mm512_mul_pd(p[g], r[g]), _mm512_set1_pd(c[i]));
  }
#pragma GCC unroll 4
  for (int g = 0; g < G; ++g) {
    const __m512i k = _mm512_cvtpd_epi64(kd[g]);  // exact: kd is an integer
    const __m512d pow2 = _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_add_epi64(k, _mm512_set1_epi64(1023)), 52));
    out[g] = _mm512_mul_pd(p[g], pow2);
  }
}

// ExpfShiftedGroup on eight lanes.
template <bool kSum>
struct ExpfShiftedGroup512 {
  using V = __m512d;
  static constexpr int kLanes = 8;
  const float* x;
  float* out;
  float shift;
  float sum = 0;
  __attribute__((target("avx512f,avx512dq"))) bool Load(int64_t i, __m512d& v) const {
    const __m256 f = _mm256_sub_ps(_mm256_loadu_ps(x + i), _mm256_set1_ps(shift));
    v = _mm512_cvtps_pd(f);
    return _mm256_movemask_ps(_mm256_and_ps(_mm256_cmp_ps(f, _mm256_set1_ps(-104.0f), _CMP_GE_OQ),
                                            _mm256_cmp_ps(f, _mm256_set1_ps(88.8f), _CMP_LT_OQ))) == 0xFF;
  }
  template <int G>
  __attribute__((target("avx512f,avx512dq"))) void Store(int64_t i, const __m512d (&v)[G]) {
    __m512d e[G];
    ExpGroups512<G>(kExpfTaylor, v, e);
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      const __m256 f = _mm512_cvtpd_ps(e[g]);
      _mm256_storeu_ps(out + i + 8 * g, f);
      if constexpr (kSum) {
        alignas(32) float lanes[8];
        _mm256_store_ps(lanes, f);
#pragma GCC unroll 8
        for (int l = 0; l < 8; ++l) sum += lanes[l];
      }
    }
  }
};

// The values [0, done) and, with sum, *sum += them in order (Group: ExpfShiftedGroup or
// ExpfShiftedGroup512).
template <template <bool> class Group>
inline int64_t ExpfShiftedBatch(const float* x, float shift, float* out, int64_t n, float* sum) {
  if (sum == nullptr) {
    Group<false> group{x, out, shift};
    return ExpBatch(n, group);
  }
  Group<true> group{x, out, shift, *sum};
  const int64_t done = ExpBatch(n, group);
  *sum = group.sum;
  return done;
}
__attribute__((target("avx512f,avx512dq"), flatten)) int64_t ExpfShiftedAvx512(const float* x, float shift,
                                                                               float* out, int64_t n, float* sum) {
  return ExpfShiftedBatch<ExpfShiftedGroup512>(x, shift, out, n, sum);
}

// The values [0, done) and, with sum, *sum += them in order.
__attribute__((target("avx2"), flatten)) int64_t ExpfShiftedAvx2(const float* x, float shift, float* out, int64_t n,
                                                      float* sum) {
  return ExpfShiftedBatch<ExpfShiftedGroup>(x, shift, out, n, sum);
}

__attribute__((target("avx2"), flatten)) int64_t ExpScaledAvx2(const float* x, double shift, double divisor, double* out,
                                                     int64_t n) {
  ExpScaledGroup group{x, out, _mm256_set1_pd(shift), _mm256_set1_pd(divisor)};
  return ExpBatch(n, group);
}

}  // namespace
#endif

void PortableExpScaled(const float* x, double shift, double divisor, double* out, int64_t n) {
  int64_t i = 0;
#if defined(__x86_64__)
  static const bool avx2 = !SimdDisabledByEnvironment() && __builtin_cpu_supports("avx2");
  while (avx2 && i + 4 <= n) {
    i += ExpScaledAvx2(x + i, shift, divisor, out + i, n - i);
    if (i + 4 <= n) {  // a group out of range: its first element by the scalar code, then go on
      out[i] = PortableExp((x[i] - shift) / divisor);
      ++i;
    }
  }
#endif
  for (; i < n; ++i) out[i] = PortableExp((x[i] - shift) / divisor);
}

namespace {

// PortableExpfShifted, and with sum, *sum += out[i] in index order.
void ExpfShifted(const float* x, float shift, float* out, int64_t n, float* sum) {
  int64_t i = 0;
  auto scalar = [&] {
    out[i] = PortableExpf(x[i] - shift);
    if (sum != nullptr) *sum += out[i];
    ++i;
  };
#if defined(__x86_64__)
  // A group out of range: its first element by the scalar code, then go on.
  static const bool avx2 = !SimdDisabledByEnvironment() && __builtin_cpu_supports("avx2");
  static const bool avx512 = avx2 && !SimdCappedAtAvx2() && __builtin_cpu_supports("avx512f") &&
                             __builtin_cpu_supports("avx512dq");
  while (avx512 && i + 8 <= n) {
    i += ExpfShiftedAvx512(x + i, shift, out + i, n - i, sum);
    if (i + 8 <= n) scalar();
  }
  while (avx2 && i + 4 <= n) {
    i += ExpfShiftedAvx2(x + i, shift, out + i, n - i, sum);
    if (i + 4 <= n) scalar();
  }
#endif
  while (i < n) scalar();
}

}  // namespace

void PortableExpfShifted(const float* x, float shift, float* out, int64_t n) { ExpfShifted(x, shift, out, n, nullptr); }

float PortableExpfShiftedSum(const float* x, float shift, float* out, int64_t n) {
  float sum = 0;
  ExpfShifted(x, shift, out, n, &sum);
  return sum;
}

}  // namespace llm42
