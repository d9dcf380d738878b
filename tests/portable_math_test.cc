// lib/numerics/portable_math: accuracy against long double libm, special values, and bits that do
// not depend on which implementation glibc dispatched to.
#include "lib/numerics/portable_math.h"

#if defined(__linux__)
#include <sys/wait.h>
#include <unistd.h>
#endif

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace llm42 {
namespace {

// Hashes of each function's bits over 2M arguments: ours, and libm's for the control.
struct Digests {
  uint64_t ours = 0, libm = 0;
};

template <typename T>
void Mix(uint64_t& h, T v) {
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof v);
  h = (h ^ b) * 1099511628211ULL;
}

Digests Compute() {
  Digests d;
  for (int i = 0; i < 2000000; ++i) {
    const double x = -20 + i * 0.0000100013;
    const double y = 1 + i * 0.37;
    double s, c;
    PortableSinCos(x * 50, &s, &c);
    Mix(d.ours, PortableExp(x));
    Mix(d.ours, PortableLog(y));
    Mix(d.ours, s);
    Mix(d.ours, c);
    Mix(d.ours, PortableExpf(static_cast<float>(x)));
    Mix(d.ours, PortablePow(10000.0, -x / 64));
    Mix(d.libm, std::exp(x));
    Mix(d.libm, std::log(y));
    Mix(d.libm, std::cos(x * 50));
  }
  return d;
}

// The child mode of DigestsIgnoreGlibcDispatch: print the digests and exit before any test.
[[maybe_unused]] const bool kChild = [] {
  if (std::getenv("LLM42_PRINT_MATH_DIGESTS") == nullptr) return false;
  const Digests d = Compute();
  std::printf("%016llx %016llx\n", static_cast<unsigned long long>(d.ours),
              static_cast<unsigned long long>(d.libm));
  std::fflush(stdout);
  std::_Exit(0);
}();

#if defined(__linux__)
// Runs this binary again with glibc told that the CPU has neither AVX2 nor FMA, which makes
// libm's exp, log and cos take their other implementations. Our functions must give the same
// bits; libm's (the control) must not where the CPU has FMA, or the mask did nothing and the
// test proves nothing. Replace PortableExp's body with std::exp and this fails.
TEST(PortableMath, DigestsIgnoreGlibcDispatch) {
  const Digests parent = Compute();
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(pipefd[1], 1);
    ::close(pipefd[0]);
    ::setenv("LLM42_PRINT_MATH_DIGESTS", "1", 1);
    ::setenv("GLIBC_TUNABLES", "glibc.cpu.hwcaps=-AVX2,-FMA", 1);
    ::execl("/proc/self/exe", "portable_math_test", static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  ::close(pipefd[1]);
  std::string out;
  char buf[256];
  for (ssize_t n; (n = ::read(pipefd[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(pipefd[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  unsigned long long ours = 0, libm = 0;
  ASSERT_EQ(std::sscanf(out.c_str(), "%llx %llx", &ours, &libm), 2) << out;
  EXPECT_EQ(ours, parent.ours) << "portable math changed with glibc's CPU dispatch";
  // Without FMA glibc already runs its non-FMA versions, so masking changes nothing there.
  if (__builtin_cpu_supports("fma")) {
    EXPECT_NE(libm, parent.libm) << "control: masking AVX2/FMA did not change libm here";
  }
}
#endif  // glibc's dispatch; across operating systems, tests/cross_os.cmake compares the digests

// The processor's fused multiply-add, the reference for FmafRoundToOdd; on a CPU without one,
// glibc's fmaf (exactly rounded in software).
__attribute__((target("fma"))) float HardwareFmaf(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
float ReferenceFmaf(float a, float b, float c) {
  if (__builtin_cpu_supports("fma")) return HardwareFmaf(a, b, c);
#if defined(__GLIBC__)
  return std::fma(a, b, c);
#else
  return HardwareFmaf(a, b, c);  // unreached: the test skips first
#endif
}

// FmafRoundToOdd gives the processor's fused multiply-add bits: on random operands over a wide
// exponent range, and on the cases a double-rounded a * b + c gets wrong (the exact result just
// off a halfway point between floats, cancellation, results below float's normal range, overflow,
// infinities, NaN). Checked to fail with the round-to-odd step taken out (a plain double sum
// rounded to float).
TEST(PortableMath, FmafRoundToOddIsTheFusedMultiplyAdd) {
#if !defined(__GLIBC__)
  // Elsewhere than glibc only the instruction is an exact reference (MinGW's fmaf is not).
  if (!__builtin_cpu_supports("fma")) GTEST_SKIP() << "this CPU has no FMA instruction and libm no exact fmaf";
#endif
  std::mt19937_64 rng(99);
  auto random_float = [&](int spread) {
    const uint32_t sign = static_cast<uint32_t>(rng() & 1) << 31;
    const uint32_t exponent = static_cast<uint32_t>(127 - spread + static_cast<int>(rng() % (2 * spread + 1)));
    return std::bit_cast<float>(sign | exponent << 23 | static_cast<uint32_t>(rng() & 0x7fffff));
  };
  int64_t checked = 0, hard = 0;
  auto check = [&](float a, float b, float c) {
    const float want = ReferenceFmaf(a, b, c), got = internal::FmafRoundToOdd(a, b, c);
    ++checked;
    if (static_cast<float>(static_cast<double>(a) * b + c) != want) ++hard;
    if (std::bit_cast<uint32_t>(got) != std::bit_cast<uint32_t>(want) && !(got != got && want != want)) {
      ADD_FAILURE() << std::hexfloat << a << " * " << b << " + " << c << ": " << got << ", the FMA gives " << want;
      return false;
    }
    return true;
  };
  for (int i = 0; i < 2000000; ++i) {
    if (!check(random_float(30), random_float(30), random_float(60))) return;
  }
  // Sums whose double rounding lands exactly halfway between two floats while the exact sum is
  // just off it: c in [1, 2) with an odd last bit, a * b = +-2^-24 (1 - 2^-46 i^2), so that
  // c + a * b is c +- half an ulp -+ 2^-70 i^2 (below double's precision). A single rounding
  // gives c; a double rounding ties to even and gives c's neighbour. Scaled by powers of two.
  for (int i = 0; i < 200000; ++i) {
    const int n = 1 + static_cast<int>(rng() % 360);
    const float scale = std::ldexp(1.0f, static_cast<int>(rng() % 60) - 30);
    const float c = std::bit_cast<float>(0x3f800001u | static_cast<uint32_t>(rng() & 0x7ffffe)) * scale;
    const float a = (1 + n * 0x1p-23f) * 0x1p-24f * scale, b = 1 - n * 0x1p-23f;
    if (!check(a, b, c) || !check(-a, b, c) || !check(a, -b, -c)) return;
  }
  // Subnormal and overflowing results, infinities, NaN.
  for (int i = 0; i < 200000; ++i) {
    if (!check(random_float(70) * 0x1p-60f, random_float(10) * 0x1p-10f, random_float(5) * 0x1p-140f)) return;
    if (!check(random_float(5) * 0x1p100f, random_float(5) * 0x1p30f, random_float(5) * 0x1p127f)) return;
  }
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (float a : {0.0f, -0.0f, 1.0f, -3.5f, inf, -inf, nan}) {
    for (float c : {0.0f, -0.0f, 2.0f, inf, -inf, nan}) {
      if (!check(a, 2.0f, c) || !check(a, -0.0f, c)) return;
    }
  }
  // The control: double rounding gets some of these wrong, or the cases tested nothing hard.
  EXPECT_GT(hard, 1000) << "of " << checked;
}

// ulps between a double and the correctly rounded long double result.
double UlpError(double got, long double exact) {
  const double ref = static_cast<double>(exact);
  if (ref == got) return 0;
  const double ulp = std::nextafter(std::abs(ref), std::numeric_limits<double>::infinity()) - std::abs(ref);
  return static_cast<double>(std::abs(static_cast<long double>(got) - exact) / ulp);
}

TEST(PortableMath, WithinTwoUlpsOfLongDouble) {
  double worst_exp = 0, worst_log = 0, worst_sin = 0, worst_cos = 0;
  for (int i = 0; i < 200000; ++i) {
    const double x = -700 + i * 0.00703;
    worst_exp = std::max(worst_exp, UlpError(PortableExp(x), std::exp(static_cast<long double>(x))));
    const double y = std::ldexp(1.0 + i * 0.0000049, i % 200 - 100);
    worst_log = std::max(worst_log, UlpError(PortableLog(y), std::log(static_cast<long double>(y))));
    const double a = -5000 + i * 0.0500003;
    double s, c;
    PortableSinCos(a, &s, &c);
    // Relative to 1 near zeros of sin/cos, where ulps of the result mean nothing.
    worst_sin = std::max(worst_sin, std::abs(s - static_cast<double>(std::sin(static_cast<long double>(a)))) / 0x1p-52);
    worst_cos = std::max(worst_cos, std::abs(c - static_cast<double>(std::cos(static_cast<long double>(a)))) / 0x1p-52);
  }
  EXPECT_LE(worst_exp, 2.0);
  EXPECT_LE(worst_log, 2.0);
  EXPECT_LE(worst_sin, 2.0);
  EXPECT_LE(worst_cos, 2.0);
}

TEST(PortableMath, ExpfIsCorrectlyRoundedOrOneUlpOff) {
  for (int i = 0; i < 400000; ++i) {
    const float x = -103.0f + static_cast<float>(i) * 0.00048f;
    const float got = PortableExpf(x);
    const auto exact = static_cast<float>(std::exp(static_cast<long double>(x)));
    if (got == exact) continue;
    EXPECT_EQ(std::nextafter(exact, got), got) << "x = " << x;
  }
}

TEST(PortableMath, SpecialValues) {
  static constexpr float kOne = 1.0f;
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(PortableExp(0.0), 1.0);
  EXPECT_EQ(PortableExp(inf), inf);
  EXPECT_EQ(PortableExp(-inf), 0.0);
  EXPECT_EQ(PortableExp(710.0), inf);
  EXPECT_GT(PortableExp(-744.0), 0.0);  // subnormal
  EXPECT_TRUE(std::isnan(PortableExp(std::nan(""))));
  EXPECT_EQ(PortableLog(1.0), 0.0);
  EXPECT_EQ(PortableLog(0.0), -inf);
  EXPECT_EQ(PortableLog(inf), inf);
  EXPECT_TRUE(std::isnan(PortableLog(-1.0)));
  EXPECT_NEAR(PortableLog(std::numeric_limits<double>::denorm_min()), -744.4400719213812, 1e-12);
  EXPECT_EQ(PortableExpf(0.0f), 1.0f);
  // Attention's maximum may come out as -0 where the scores hold both zeros (MaxScore):
  // score - max is then +0 or -0, and both must give 1.
  const float from_minus_zero = PortableExpf(-0.0f);
  EXPECT_EQ(std::memcmp(&from_minus_zero, &kOne, sizeof kOne), 0);
  EXPECT_EQ(PortableExpf(100.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(PortableExpf(-200.0f), 0.0f);
  EXPECT_TRUE(std::isnan(PortableExpf(std::nanf(""))));
  double s, c;
  PortableSinCos(0.0, &s, &c);
  EXPECT_EQ(s, 0.0);
  EXPECT_EQ(c, 1.0);
}

// The batch form (four groups of four lanes side by side on AVX2, of eight on AVX-512, then
// single groups; the suite runs this file again as a CPU with AVX2 only, portable_math_avx2)
// gives PortableExpf's bits for every argument: softmax-like inputs (first a long run inside the
// polynomial's range, so the four-group path runs, then a wider spread that leaves it every few
// values), the range edges, specials, and ragged lengths that end in the scalar loop. Checked to
// fail when the vector polynomial's 0.5 coefficient is 0.5000001 (in the AVX-512 kernel too), and
// when the four-group path uses group 0's reduction for group 1. PortableExpfShiftedSum gives the
// same values and their sum added in index order (checked to fail with two lanes' additions
// swapped, in the AVX-512 kernel too).
TEST(PortableMath, ExpfShiftedMatchesTheScalarBitForBit) {
  std::vector<float> x;
  uint32_t state = 12345;
  for (int i = 0; i < 200000; ++i) {
    state = state * 1664525u + 1013904223u;
    const float u = static_cast<float>(state >> 8) / 16777216.0f;
    x.push_back(i < 100000 ? -8.0f * u : -120.0f + 215.0f * u);
  }
  for (float v : {-104.0f, std::nextafter(-104.0f, -200.0f), 88.7999f, 88.8f, 0.0f, -0.0f, 1e-30f, -1e-30f,
                  std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min()}) {
    x.push_back(v);
  }
  for (float shift : {0.0f, 3.5f, -2.25f}) {
    for (size_t n : {x.size(), size_t{100000}, size_t{1000}, size_t{7}, size_t{3}}) {
      std::vector<float> out(n), summed(n);
      PortableExpfShifted(x.data(), shift, out.data(), static_cast<int64_t>(n));
      const float sum = PortableExpfShiftedSum(x.data(), shift, summed.data(), static_cast<int64_t>(n));
      float want_sum = 0;
      for (size_t i = 0; i < n; ++i) {
        const float want = PortableExpf(x[i] - shift);
        ASSERT_EQ(std::memcmp(&out[i], &want, sizeof want), 0) << "x " << x[i] << " shift " << shift;
        ASSERT_EQ(std::memcmp(&summed[i], &want, sizeof want), 0) << "x " << x[i] << " shift " << shift;
        want_sum += want;
      }
      EXPECT_EQ(std::memcmp(&sum, &want_sum, sizeof sum), 0) << "n " << n << " shift " << shift;
    }
  }
  // Sensitivity: the same comparison notices a one-ulp difference.
  const float a = PortableExpf(-1.0f), b = std::nextafter(a, 1.0f);
  EXPECT_NE(std::memcmp(&a, &b, sizeof a), 0);
}

// The sampler's batch form (on AVX2 four groups of four lanes side by side, then single groups)
// gives PortableExp's bits for every argument: the lanes in the polynomial's range (first a long
// run of logit-like values, so the four-group path runs, then every other value wide), both range
// ends, arguments whose results are subnormal, zero or infinite (the scalar code's branches),
// specials, ragged lengths. Checked to fail with the vector polynomial's 1/24 coefficient one ulp
// larger, and when the four-group path uses group 0's reduction for group 1.
TEST(PortableMath, ExpScaledMatchesTheScalarBitForBit) {
  std::vector<float> x;
  uint32_t state = 777;
  for (int i = 0; i < 300000; ++i) {
    state = state * 1664525u + 1013904223u;
    const float u = static_cast<float>(state >> 8) / 16777216.0f;
    x.push_back(i % 2 == 0 && i >= 100000 ? -1500.0f + 2300.0f * u : -30.0f + 31.0f * u);  // wide, and logit-like
  }
  for (float v : {0.0f, -0.0f, 708.0f, -708.0f, 709.0f, 709.1f, -745.0f, -746.0f, 1e-30f,
                  std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min()}) {
    x.push_back(v);
  }
  for (double shift : {0.0, 3.25, -1.5}) {
    for (double divisor : {1.0, 0.8, 0.3}) {
      for (size_t n : {x.size(), size_t{7}, size_t{2}}) {
        std::vector<double> out(n);
        PortableExpScaled(x.data(), shift, divisor, out.data(), static_cast<int64_t>(n));
        for (size_t i = 0; i < n; ++i) {
          const double want = PortableExp((x[i] - shift) / divisor);
          ASSERT_EQ(std::memcmp(&out[i], &want, sizeof want), 0) << "x " << x[i] << " shift " << shift << " / " << divisor;
        }
      }
    }
  }
}

}  // namespace
}  // namespace llm42
