#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/backend/cpu/row_dot.h"
#include "lib/kv/kv_cache.h"
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
  if (!internal::CpuHasAvx2()) GTEST_SKIP() << "this CPU lacks AVX2/FMA/F16C: no hardware conversion to compare with";
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
  if (type == GgmlType::kQ4_0) {  // ggml's layout: low nibbles are elements 0-15, high 16-31
    m.row_bytes = static_cast<size_t>(cols / kQ4_0BlockSize) * sizeof(BlockQ4_0);
    m.bytes.resize(m.row_bytes * static_cast<size_t>(rows));
    auto* blocks = reinterpret_cast<BlockQ4_0*>(m.bytes.data());
    for (int64_t b = 0; b < rows * cols / kQ4_0BlockSize; ++b) {
      blocks[b].scale = Fp32ToFp16(0.1f + 0.01f * static_cast<float>(b % 7));
      const float d = Fp16ToFp32(blocks[b].scale);
      for (int j = 0; j < 16; ++j) {
        const int lo = static_cast<int>(rng() % 16), hi = static_cast<int>(rng() % 16);
        blocks[b].q[j] = static_cast<uint8_t>(lo | (hi << 4));
        m.values[static_cast<size_t>(b * kQ4_0BlockSize + j)] = d * static_cast<float>(lo - 8);
        m.values[static_cast<size_t>(b * kQ4_0BlockSize + j + 16)] = d * static_cast<float>(hi - 8);
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

std::vector<float> RandomVector(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

bool SameBits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

class MatMulTest : public ::testing::TestWithParam<GgmlType> {};

// Both schedules and both kernel families against a float64 reference, across batch sizes
// that exercise every micro-kernel group and K lengths on and off the 8- and 32-wide steps.
TEST_P(MatMulTest, MatchesFloat64Reference) {
  const GgmlType type = GetParam();
  std::mt19937 rng(11);
  for (int64_t cols : {32, 40, 43, 96, 172, 256}) {
    if (GetGgmlTypeInfo(static_cast<uint32_t>(type))->block_size > 1 && cols % 32 != 0) continue;
    const int64_t rows = 37;
    TestMatrix w = MakeMatrix(type, rows, cols, rng);
    WeightMatrix wm{type, w.bytes.data(), rows, cols, w.row_bytes};
    for (int64_t m : {1, 3, 5, 33}) {
      const std::vector<float> x = RandomVector(static_cast<size_t>(m * cols), static_cast<uint32_t>(m));
      for (bool simd : {false, true}) {
        for (Schedule sched : {Schedule::kFast, Schedule::kFixed}) {
          CpuBackend backend(2, simd);
          std::vector<float> y(static_cast<size_t>(m * rows));
          backend.MatMul(x.data(), m, wm, y.data(), sched);
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
                  << "simd " << simd << " fixed " << (sched == Schedule::kFixed) << " m " << m
                  << " k " << cols;
            }
          }
        }
      }
    }
  }
}

// DETERMINISM_TESTS.md item 8 for MatMul: row i of fixed(X[:M]) equals row i of fixed(X) for
// M in {1, 3, 8, 33, 256}, at 1 and 2 threads, K on and off the kernel's steps, and the portable
// kernels give the AVX2 kernels' bits.
TEST_P(MatMulTest, FixedIsRowInvariantAndSimdIndependent) {
  const GgmlType type = GetParam();
  std::mt19937 rng(21);
  for (int64_t cols : {64, 96, 43, 200}) {
    if (GetGgmlTypeInfo(static_cast<uint32_t>(type))->block_size > 1 && cols % 32 != 0) continue;
    const int64_t rows = 50, full = 256;
    TestMatrix w = MakeMatrix(type, rows, cols, rng);
    WeightMatrix wm{type, w.bytes.data(), rows, cols, w.row_bytes};
    const std::vector<float> x = RandomVector(static_cast<size_t>(full * cols), 5);
    std::vector<float> reference(static_cast<size_t>(full * rows));
    CpuBackend(2, true).MatMul(x.data(), full, wm, reference.data(), Schedule::kFixed);
    for (int threads : {1, 2}) {
      for (bool simd : {true, false}) {
        CpuBackend backend(threads, simd);
        for (int64_t m : {1, 3, 8, 33, 256}) {
          std::vector<float> y(static_cast<size_t>(m * rows));
          backend.MatMul(x.data(), m, wm, y.data(), Schedule::kFixed);
          ASSERT_TRUE(SameBits(y.data(), reference.data(), y.size()))
              << "k " << cols << " m " << m << " threads " << threads << " simd " << simd;
        }
        // A row in the middle of a batch, alone.
        std::vector<float> one(static_cast<size_t>(rows));
        backend.MatMul(x.data() + 100 * cols, 1, wm, one.data(), Schedule::kFixed);
        ASSERT_TRUE(SameBits(one.data(), reference.data() + 100 * rows, one.size()));
      }
    }
  }
}

// The sensitivity control of the test above: the fast schedule really depends on the batch.
TEST_P(MatMulTest, FastDependsOnTheBatch) {
  const GgmlType type = GetParam();
  if (!internal::CpuHasAvx2()) GTEST_SKIP() << "this CPU lacks AVX2/FMA/F16C: the fast family has only its portable kernel here";
  std::mt19937 rng(31);
  const int64_t rows = 64, cols = 256;
  TestMatrix w = MakeMatrix(type, rows, cols, rng);
  WeightMatrix wm{type, w.bytes.data(), rows, cols, w.row_bytes};
  const std::vector<float> x = RandomVector(static_cast<size_t>(8 * cols), 7);
  CpuBackend backend(2);
  std::vector<float> alone(static_cast<size_t>(rows)), batched(static_cast<size_t>(8 * rows));
  backend.MatMul(x.data(), 1, wm, alone.data(), Schedule::kFast);
  backend.MatMul(x.data(), 8, wm, batched.data(), Schedule::kFast);
  EXPECT_FALSE(SameBits(alone.data(), batched.data(), alone.size()));
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MatMulTest,
                         ::testing::Values(GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16,
                                           GgmlType::kQ8_0, GgmlType::kQ4_0),
                         [](const ::testing::TestParamInfo<GgmlType>& info) {
                           return std::string(GetGgmlTypeInfo(static_cast<uint32_t>(info.param))->name);
                         });

// Sequences of different lengths in one paged cache (block size 16), filled with random K/V.
struct AttentionFixture {
  static constexpr int64_t kHeads = 4, kKvHeads = 2, kHeadDim = 64;
  KvCache cache{1, kKvHeads * kHeadDim, 256};
  std::vector<int32_t> seqs;
  std::vector<int64_t> lengths;

  explicit AttentionFixture(const std::vector<int64_t>& lens) : lengths(lens) {
    std::mt19937 rng(9);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    const KvLayerView kv = cache.layer(0);
    for (int64_t len : lens) {
      const int32_t s = cache.Create();
      EXPECT_TRUE(cache.Reserve(s, len));
      for (int64_t p = 0; p < len; ++p) {
        for (int64_t d = 0; d < kv.kv_dim; ++d) {
          kv.key(cache.block_table(s), p)[d] = dist(rng);
          kv.value(cache.block_table(s), p)[d] = dist(rng);
        }
      }
      seqs.push_back(s);
    }
  }

  // Attention for (sequence index, position) pairs, in one batch.
  std::vector<float> Run(CpuBackend& be, const std::vector<std::pair<int, int32_t>>& rows,
                         const std::vector<float>& q, Schedule s) {
    std::vector<int32_t> positions;
    std::vector<const int32_t*> tables;
    std::vector<float> qs;
    for (const auto& [seq, pos] : rows) {
      positions.push_back(pos);
      tables.push_back(cache.block_table(seqs[static_cast<size_t>(seq)]));
      qs.insert(qs.end(), q.begin() + seq * kHeads * kHeadDim, q.begin() + (seq + 1) * kHeads * kHeadDim);
    }
    AttentionInput in{static_cast<int64_t>(rows.size()), positions.data(), tables.data(), cache.layer(0),
                      kHeads, kKvHeads, kHeadDim};
    std::vector<float> out(qs.size());
    be.Attention(qs.data(), in, out.data(), s);
    return out;
  }
};

TEST(Attention, BothSchedulesMatchFloat64Reference) {
  AttentionFixture f({37, 300});
  const std::vector<float> q = RandomVector(2 * 4 * 64, 3);
  CpuBackend be(2);
  for (Schedule s : {Schedule::kFast, Schedule::kFixed}) {
    const std::vector<float> out = f.Run(be, {{0, 36}, {1, 299}}, q, s);
    for (int row = 0; row < 2; ++row) {
      const int32_t* table = f.cache.block_table(f.seqs[static_cast<size_t>(row)]);
      const KvLayerView kv = f.cache.layer(0);
      const int64_t len = f.lengths[static_cast<size_t>(row)];
      for (int64_t h = 0; h < 4; ++h) {
        const float* qh = q.data() + (row * 4 + h) * 64;
        std::vector<double> sc(static_cast<size_t>(len));
        double mx = -1e300, sum = 0;
        for (int64_t t = 0; t < len; ++t) {
          double d = 0;
          for (int64_t i = 0; i < 64; ++i) d += static_cast<double>(qh[i]) * kv.key(table, t)[(h / 2) * 64 + i];
          sc[static_cast<size_t>(t)] = d / 8.0;
          mx = std::max(mx, sc[static_cast<size_t>(t)]);
        }
        for (double& x : sc) sum += (x = std::exp(x - mx));
        for (int64_t i = 0; i < 64; ++i) {
          double o = 0;
          for (int64_t t = 0; t < len; ++t) o += sc[static_cast<size_t>(t)] / sum * kv.value(table, t)[(h / 2) * 64 + i];
          ASSERT_NEAR(out[static_cast<size_t>((row * 4 + h) * 64 + i)], o, 1e-5);
        }
      }
    }
  }
}

// Item 8 for attention: KV lengths straddling the fixed chunk (256) and block (16) boundaries;
// each row alone, in batches of other rows, at 1 and 4 threads: the same bits.
TEST(Attention, FixedIsRowInvariant) {
  const std::vector<int64_t> lens = {1, 15, 16, 17, 255, 256, 257, 600};
  AttentionFixture f(lens);
  const std::vector<float> q = RandomVector(lens.size() * 4 * 64, 4);
  std::vector<std::pair<int, int32_t>> all;
  for (size_t i = 0; i < lens.size(); ++i) all.push_back({static_cast<int>(i), static_cast<int32_t>(lens[i] - 1)});
  CpuBackend two(2), four(4), one(1);
  const std::vector<float> batch = f.Run(two, all, q, Schedule::kFixed);
  const size_t row = 4 * 64;
  for (CpuBackend* be : {&one, &four}) {
    EXPECT_TRUE(SameBits(f.Run(*be, all, q, Schedule::kFixed).data(), batch.data(), batch.size()));
    for (size_t i = 0; i < all.size(); ++i) {
      const std::vector<float> alone = f.Run(*be, {all[i]}, q, Schedule::kFixed);
      EXPECT_TRUE(SameBits(alone.data(), batch.data() + i * row, row)) << "length " << lens[i];
    }
  }
}

// The control: fast attention of a long prefix computed alone (split across threads) differs
// in some bit from the same row in a batch (not split).
TEST(Attention, FastDependsOnTheBatch) {
  AttentionFixture f({600, 600, 600, 600});
  const std::vector<float> q = RandomVector(4 * 4 * 64, 6);
  CpuBackend be(4);
  const std::vector<float> alone = f.Run(be, {{0, 599}}, q, Schedule::kFast);
  const std::vector<float> batch = f.Run(be, {{0, 599}, {1, 599}, {2, 599}, {3, 599}}, q, Schedule::kFast);
  EXPECT_FALSE(SameBits(alone.data(), batch.data(), alone.size()));
}

// Item 8 for the per-row ops: a row's bits do not depend on the rows computed with it.
TEST(CpuBackend, RowOpsAreRowInvariant) {
  const int64_t n = 264, full = 256;
  const std::vector<float> x = RandomVector(static_cast<size_t>(full * n), 8);
  const std::vector<float> w = RandomVector(static_cast<size_t>(n), 9);
  std::vector<int32_t> positions(static_cast<size_t>(full));
  for (int64_t i = 0; i < full; ++i) positions[static_cast<size_t>(i)] = static_cast<int32_t>(i * 7);
  std::mt19937 rng(2);
  TestMatrix table = MakeMatrix(GgmlType::kF16, 300, n, rng);
  WeightMatrix tm{GgmlType::kF16, table.bytes.data(), 300, n, table.row_bytes};
  std::vector<int32_t> ids(static_cast<size_t>(full));
  for (int64_t i = 0; i < full; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>((i * 37) % 300);

  auto run = [&](CpuBackend& be, int64_t m) {
    std::vector<float> norm(static_cast<size_t>(m * n)), rope(x.begin(), x.begin() + m * n),
        glu(static_cast<size_t>(m * n)), emb(static_cast<size_t>(m * n));
    be.RmsNorm(x.data(), w.data(), m, n, 1e-5f, norm.data(), Schedule::kFixed);
    RopeParams rp;
    rp.n_rot = 64;
    be.Rope(rope.data(), m, 4, 66, rp, positions.data(), Schedule::kFixed);
    be.SwiGlu(x.data(), w.data(), std::min<int64_t>(m * n, n), glu.data(), Schedule::kFixed);
    be.Embed(tm, ids.data(), m, emb.data(), Schedule::kFixed);
    norm.insert(norm.end(), rope.begin(), rope.end());
    norm.insert(norm.end(), emb.begin(), emb.end());
    return norm;
  };
  CpuBackend two(2);
  const std::vector<float> ref = run(two, full);
  for (int threads : {1, 2}) {
    CpuBackend be(threads);
    for (int64_t m : {1, 3, 8, 33, 256}) {
      const std::vector<float> got = run(be, m);
      const size_t mn = static_cast<size_t>(m * n), fn = static_cast<size_t>(full * n);
      EXPECT_TRUE(SameBits(got.data(), ref.data(), mn)) << "rms_norm m " << m;
      EXPECT_TRUE(SameBits(got.data() + mn, ref.data() + fn, mn)) << "rope m " << m;
      EXPECT_TRUE(SameBits(got.data() + 2 * mn, ref.data() + 2 * fn, mn)) << "embed m " << m;
    }
  }
}

TEST(CpuBackend, RmsNormRopeAndSwiGlu) {
  CpuBackend be(1);
  const std::vector<float> x = {1, 2, 3, 4}, w = {1, 1, 2, 0.5f};
  std::vector<float> y(4);
  be.RmsNorm(x.data(), w.data(), 1, 4, 0.0f, y.data(), Schedule::kFixed);
  const double inv = 1 / std::sqrt(30.0 / 4);
  EXPECT_NEAR(y[2], 3 * inv * 2, 1e-6);
  EXPECT_NEAR(y[3], 4 * inv * 0.5, 1e-6);

  // RoPE rotates pair i by pos * base^(-2i/n_rot); dims past n_rot stay.
  std::vector<float> r = {1, 0, 1, 0, 7, 7};
  const int32_t pos = 3;
  RopeParams rp;
  rp.n_rot = 4;
  rp.freq_base = 100.0f;
  be.Rope(r.data(), 1, 1, 6, rp, &pos, Schedule::kFixed);
  EXPECT_NEAR(r[0], std::cos(3.0), 1e-6);
  EXPECT_NEAR(r[1], std::sin(3.0), 1e-6);
  EXPECT_NEAR(r[2], std::cos(3.0 / 10), 1e-6);
  EXPECT_NEAR(r[3], std::sin(3.0 / 10), 1e-6);
  EXPECT_EQ(r[4], 7);
  // NeoX pairs (i, i + n_rot/2); frequency factors divide each pair's angle; freq_scale
  // scales positions.
  std::vector<float> n = {1, 1, 0, 0, 7, 7};
  const float factors[2] = {1.0f, 4.0f};
  rp.neox = true;
  rp.freq_factors = factors;
  rp.freq_scale = 0.5f;
  be.Rope(n.data(), 1, 1, 6, rp, &pos, Schedule::kFixed);
  EXPECT_NEAR(n[0], std::cos(1.5), 1e-6);
  EXPECT_NEAR(n[2], std::sin(1.5), 1e-6);
  EXPECT_NEAR(n[1], std::cos(1.5 / 10 / 4), 1e-6);
  EXPECT_NEAR(n[3], std::sin(1.5 / 10 / 4), 1e-6);
  EXPECT_EQ(n[4], 7);

  const std::vector<float> g = {0, 2}, u = {5, 3};
  std::vector<float> s(2);
  be.SwiGlu(g.data(), u.data(), 2, s.data(), Schedule::kFixed);
  EXPECT_EQ(s[0], 0);
  EXPECT_NEAR(s[1], 2 / (1 + std::exp(-2.0)) * 3, 1e-6);
}

}  // namespace
}  // namespace llm42
