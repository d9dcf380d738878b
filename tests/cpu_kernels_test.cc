#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/backend/cpu/row_dot.h"
#include "lib/model/ggml_types.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace llm42 {
namespace {

#if defined(__x86_64__)
__attribute__((target("f16c"))) uint16_t HardwareFp16(float f) {
  return static_cast<uint16_t>(_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(f), 0), 0));
}
#endif

TEST(Fp16, ConversionsRoundTripEveryHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = Fp16ToFp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(Fp32ToFp16(f), h) << std::hex << h;
  }
}

TEST(Fp16, MatchesF16cInstructionsBitForBit) {
#if defined(__x86_64__)
  if (!internal::CpuHasAvx2()) GTEST_SKIP() << "this CPU lacks F16C";
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-70000.0f, 70000.0f);
  for (int i = 0; i < 200000; ++i) {
    float f = dist(rng) * std::pow(2.0f, static_cast<float>(static_cast<int>(rng() % 40) - 30));
    ASSERT_EQ(Fp32ToFp16(f), HardwareFp16(f)) << f;
  }
#else
  GTEST_SKIP() << "not an x86-64 build";
#endif
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(Fp32ToBf16(1.0f), 0x3F80);
  EXPECT_EQ(Bf16ToFp32(0x3F80), 1.0f);
  // 1 + 2^-8 is halfway between two bf16 values: ties go to the even one (1.0).
  EXPECT_EQ(Fp32ToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);
  EXPECT_EQ(Fp32ToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);
}

// A weight matrix in `type` with its exact f32 values alongside.
struct TestMatrix {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
  size_t row_bytes = 0;
};

TestMatrix MakeMatrix(GgmlType type, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  TestMatrix m;
  m.values.resize(static_cast<size_t>(rows * cols));
  if (type == GgmlType::kQ8_0) {
    m.row_bytes = static_cast<size_t>(cols / kQ8_0BlockSize) * sizeof(BlockQ8_0);
    m.bytes.resize(m.row_bytes * static_cast<size_t>(rows));
    auto* blocks = reinterpret_cast<BlockQ8_0*>(m.bytes.data());
    for (int64_t b = 0; b < rows * cols / kQ8_0BlockSize; ++b) {
      blocks[b].scale = Fp32ToFp16(0.01f + 0.001f * static_cast<float>(b % 7));
      for (int j = 0; j < kQ8_0BlockSize; ++j) {
        blocks[b].q[j] = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
        m.values[static_cast<size_t>(b * kQ8_0BlockSize + j)] = Fp16ToFp32(blocks[b].scale) * blocks[b].q[j];
      }
    }
    return m;
  }
  const size_t es = type == GgmlType::kF32 ? 4 : 2;
  m.row_bytes = static_cast<size_t>(cols) * es;
  m.bytes.resize(m.row_bytes * static_cast<size_t>(rows));
  for (size_t i = 0; i < m.values.size(); ++i) {
    const float f = dist(rng);
    if (type == GgmlType::kF32) {
      std::memcpy(m.bytes.data() + 4 * i, &f, 4);
      m.values[i] = f;
    } else {
      const uint16_t h = type == GgmlType::kF16 ? Fp32ToFp16(f) : Fp32ToBf16(f);
      std::memcpy(m.bytes.data() + 2 * i, &h, 2);
      m.values[i] = type == GgmlType::kF16 ? Fp16ToFp32(h) : Bf16ToFp32(h);
    }
  }
  return m;
}

class MatMulTest : public ::testing::TestWithParam<GgmlType> {};

// Both kernel families against a float64 reference, across batch sizes that exercise the
// 1..4-row micro-kernels and K lengths on and off the 8- and 32-wide steps.
TEST_P(MatMulTest, MatchesFloat64Reference) {
  const GgmlType type = GetParam();
  std::mt19937 rng(11);
  for (int64_t cols : {32, 64, 96, 172, 256}) {
    if (type == GgmlType::kQ8_0 && cols % 32 != 0) continue;
    const int64_t rows = 37;
    TestMatrix w = MakeMatrix(type, rows, cols, rng);
    WeightMatrix wm{type, w.bytes.data(), rows, cols, w.row_bytes};
    for (int64_t m : {1, 3, 5, 33}) {
      std::normal_distribution<float> dist(0.0f, 1.0f);
      std::vector<float> x(static_cast<size_t>(m * cols));
      for (float& v : x) v = dist(rng);
      for (bool simd : {false, true}) {
        if (simd && !internal::CpuHasAvx2()) continue;
        CpuBackend backend(2, simd);
        std::vector<float> y(static_cast<size_t>(m * rows));
        backend.MatMul(x.data(), m, wm, y.data());
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t r = 0; r < rows; ++r) {
            double ref = 0, mag = 0;
            for (int64_t k = 0; k < cols; ++k) {
              const double p = static_cast<double>(x[static_cast<size_t>(i * cols + k)]) *
                               w.values[static_cast<size_t>(r * cols + k)];
              ref += p;
              mag += std::fabs(p);
            }
            ASSERT_NEAR(y[static_cast<size_t>(i * rows + r)], ref, 1e-5 * mag + 1e-6)
                << "type " << static_cast<int>(type) << " simd " << simd << " m " << m << " k " << cols;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MatMulTest,
                         ::testing::Values(GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16,
                                           GgmlType::kQ8_0));

TEST(CpuBackend, AttentionMatchesFloat64Reference) {
  const int64_t n_head = 4, n_head_kv = 2, hd = 8, len = 37;
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> k(static_cast<size_t>(len * n_head_kv * hd)), v(k.size()),
      q(static_cast<size_t>(n_head * hd));
  for (float& f : k) f = dist(rng);
  for (float& f : v) f = dist(rng);
  for (float& f : q) f = dist(rng);
  const int32_t pos = static_cast<int32_t>(len - 1);
  const float* kp = k.data();
  const float* vp = v.data();
  AttentionInput in{1, &pos, &kp, &vp, n_head, n_head_kv, hd};
  std::vector<float> out(q.size());
  CpuBackend(2).Attention(q.data(), in, out.data());
  for (int64_t h = 0; h < n_head; ++h) {
    const int64_t g = h / (n_head / n_head_kv);
    std::vector<double> s(static_cast<size_t>(len));
    double mx = -1e300, sum = 0;
    for (int64_t t = 0; t < len; ++t) {
      double d = 0;
      for (int64_t i = 0; i < hd; ++i) d += static_cast<double>(q[static_cast<size_t>(h * hd + i)]) * k[static_cast<size_t>((t * n_head_kv + g) * hd + i)];
      s[static_cast<size_t>(t)] = d / std::sqrt(static_cast<double>(hd));
      mx = std::max(mx, s[static_cast<size_t>(t)]);
    }
    for (double& x : s) sum += (x = std::exp(x - mx));
    for (int64_t i = 0; i < hd; ++i) {
      double o = 0;
      for (int64_t t = 0; t < len; ++t) o += s[static_cast<size_t>(t)] / sum * v[static_cast<size_t>((t * n_head_kv + g) * hd + i)];
      EXPECT_NEAR(out[static_cast<size_t>(h * hd + i)], o, 1e-5) << "head " << h << " dim " << i;
    }
  }
}

TEST(CpuBackend, RmsNormRopeAndSwiGlu) {
  CpuBackend be(1);
  const std::vector<float> x = {1, 2, 3, 4}, w = {1, 1, 2, 0.5f};
  std::vector<float> y(4);
  be.RmsNorm(x.data(), w.data(), 1, 4, 0.0f, y.data());
  const double inv = 1 / std::sqrt(30.0 / 4);
  EXPECT_NEAR(y[2], 3 * inv * 2, 1e-6);
  EXPECT_NEAR(y[3], 4 * inv * 0.5, 1e-6);

  // RoPE rotates pair i by pos * base^(-2i/n_rot); dims past n_rot stay.
  std::vector<float> r = {1, 0, 1, 0, 7, 7};
  const int32_t pos = 3;
  be.Rope(r.data(), 1, 1, 6, 4, &pos, 100.0f);
  EXPECT_NEAR(r[0], std::cos(3.0), 1e-6);
  EXPECT_NEAR(r[1], std::sin(3.0), 1e-6);
  EXPECT_NEAR(r[2], std::cos(3.0 / 10), 1e-6);
  EXPECT_NEAR(r[3], std::sin(3.0 / 10), 1e-6);
  EXPECT_EQ(r[4], 7);

  const std::vector<float> g = {0, 2}, u = {5, 3};
  std::vector<float> s(2);
  be.SwiGlu(g.data(), u.data(), 2, s.data());
  EXPECT_EQ(s[0], 0);
  EXPECT_NEAR(s[1], 2 / (1 + std::exp(-2.0)) * 3, 1e-6);
}

}  // namespace
}  // namespace llm42
