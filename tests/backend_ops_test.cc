// The op conformance suite: every op of the Backend interface, on every registered backend that
// can run here (the CPU always; CUDA when built and a device is present), against float64
// references, plus the fixed schedule's row invariance (docs/determinism-tests.md item 8) per backend.
// A backend joins by registering (lib/backend/backend_registry.cc).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gtest/gtest.h"
#include "lib/backend/backend_registry.h"
#include "lib/sampling/logit_controls.h"
#include "lib/sampling/sampler.h"
#include "tests/backend_harness.h"
#include "tests/op_reference.h"

namespace llm42 {
namespace {

using testing::AttentionFixture;
using testing::BackendHarness;
using testing::MakeMatrix;
using testing::RandomVector;
using testing::SameBits;
using testing::TestMatrix;

class BackendOpsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto be = CreateBackend(GetParam(), BackendOptions{2});
    // Only a device backend that cannot run on this machine skips (UNSUPPORTED: not built, no
    // driver, no device, too old a GPU), saying why; the CPU always runs, and any other error
    // (a device that is there but fails to start) fails the test.
    if (!be.ok() && GetParam() != "cpu" && be.status().code() == absl::StatusCode::kUnimplemented) {
      GTEST_SKIP() << "backend " << GetParam() << " cannot run here: " << be.status().message();
    }
    ASSERT_TRUE(be.ok()) << be.status();
    be_ = std::move(be).value();
    h_ = std::make_unique<BackendHarness>(*be_);
  }

  // Relative tolerance against float64: the CPU computes in f32; a GPU multiplies in bf16
  // (8 significant bits) with f32 accumulation, and keeps f32 weights as bf16.
  double Tolerance() const { return GetParam() == "cpu" ? 1e-5 : 1.6e-2; }

  WeightMatrix Upload(GgmlType type, const TestMatrix& w, int64_t rows, int64_t cols) {
    auto up = be_->UploadWeight(WeightMatrix{type, w.bytes.data(), rows, cols, w.row_bytes});
    EXPECT_TRUE(up.ok()) << up.status();
    return up.ok() ? *up : WeightMatrix{};
  }

  std::unique_ptr<Backend> be_;
  std::unique_ptr<BackendHarness> h_;
};

// Both schedules against a float64 reference, across batch sizes that exercise every kernel
// group and K lengths on and off the kernels' steps.
TEST_P(BackendOpsTest, MatMulMatchesFloat64Reference) {
  std::mt19937 rng(11);
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0, GgmlType::kQ4_0}) {
    // 352: eleven 32-element blocks, eight at a time and three alone in the CPU's fast int8
    // decode (Int8GemvAvx2Fast); a last block's scale off by half fails it (tried).
    for (int64_t cols : {32, 40, 43, 96, 256, 352}) {
      if (GetGgmlTypeInfo(static_cast<uint32_t>(type))->block_size > 1 && cols % 32 != 0) continue;
      const int64_t rows = 37;
      const TestMatrix w = MakeMatrix(type, rows, cols, rng);
      const WeightMatrix wm = Upload(type, w, rows, cols);
      for (int64_t m : {1, 3, 5, 33, 70}) {
        const std::vector<float> x = RandomVector(static_cast<size_t>(m * cols), static_cast<uint32_t>(m));
        std::vector<double> ref, mag;
        testing::ReferenceMatMul(x, m, w.values, rows, cols, &ref, &mag);
        const bool quantized = GetGgmlTypeInfo(static_cast<uint32_t>(type))->block_size > 1;
        const std::vector<double> q8 = testing::ActivationQ8Bound(x, m, w.values, rows, cols);
        for (Schedule sched : {Schedule::kFast, Schedule::kFixed}) {
          const std::vector<float> y = h_->MatMul(x, m, wm, sched);
          for (size_t i = 0; i < y.size(); ++i) {
            // Both schedules may round activations to 8 bits against quantized weights (the
            // CPU's int8_dot.h).
            const double extra = quantized ? q8[i] : 0.0;
            ASSERT_NEAR(y[i], ref[i], Tolerance() * mag[i] + extra + 1e-6)
                << GetGgmlTypeInfo(static_cast<uint32_t>(type))->name << " fixed " << (sched == Schedule::kFixed)
                << " m " << m << " k " << cols << " at " << i;
          }
        }
      }
    }
  }
}

// Item 8 for MatMul: row i of fixed(X[:M]) equals row i of fixed(X) for M in 1..256, and a row
// in the middle of a batch alone; also with the rows' schedules mixed (fast rows beside).
TEST_P(BackendOpsTest, FixedMatMulIsRowInvariant) {
  std::mt19937 rng(21);
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0, GgmlType::kQ4_0}) {
    const int64_t rows = 50, cols = 96, full = 256;
    const TestMatrix w = MakeMatrix(type, rows, cols, rng);
    const WeightMatrix wm = Upload(type, w, rows, cols);
    const std::vector<float> x = RandomVector(static_cast<size_t>(full * cols), 5);
    const std::vector<float> ref = h_->MatMul(x, full, wm, Schedule::kFixed);
    for (int64_t m : {1, 2, 3, 8, 33, 64, 255}) {
      const std::vector<float> y = h_->MatMul(std::vector<float>(x.begin(), x.begin() + m * cols), m, wm, Schedule::kFixed);
      ASSERT_TRUE(SameBits(y.data(), ref.data(), y.size())) << "m " << m;
    }
    const std::vector<float> one = h_->MatMul(std::vector<float>(x.begin() + 100 * cols, x.begin() + 101 * cols), 1, wm,
                                              Schedule::kFixed);
    ASSERT_TRUE(SameBits(one.data(), ref.data() + 100 * rows, one.size()));
    std::vector<Schedule> mixed(static_cast<size_t>(full));
    for (size_t i = 0; i < mixed.size(); ++i) mixed[i] = i % 3 == 0 ? Schedule::kFixed : Schedule::kFast;
    const std::vector<float> y = h_->MatMul(x, full, wm, Schedules(mixed.data()));
    for (int64_t i = 0; i < full; i += 3) {
      ASSERT_TRUE(SameBits(y.data() + i * rows, ref.data() + i * rows, static_cast<size_t>(rows))) << "mixed row " << i;
    }
  }
}

// MatMulShared (the query/key/value and gate/up projections in one op): each matrix's output
// has the bits MatMul gives it alone for fixed rows, and agrees within rounding for fast ones
// (whose kernels may differ with the chunking), for every type, at row counts whose pool chunks
// straddle two matrices; a matrix of another width is refused. Checked to fail when a chunk
// that straddles two matrices computes only the first one's rows.
TEST_P(BackendOpsTest, MatMulSharedGivesEachMatMulsOutput) {
  std::mt19937 rng(51);
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0, GgmlType::kQ4_0}) {
    const int64_t cols = 96, n[3] = {37, 50, 13};
    std::vector<TestMatrix> w;  // reserved: uploaded views point into its elements
    std::vector<WeightMatrix> wm;
    w.reserve(3);
    for (int i = 0; i < 3; ++i) {
      w.push_back(MakeMatrix(type, n[i], cols, rng));
      wm.push_back(Upload(type, w.back(), n[i], cols));
    }
    for (int64_t m : {1, 3, 40}) {
      const std::vector<float> x = RandomVector(static_cast<size_t>(m * cols), static_cast<uint32_t>(m + 7));
      std::vector<Schedule> mixed(static_cast<size_t>(m));
      for (size_t i = 0; i < mixed.size(); ++i) mixed[i] = i % 2 == 0 ? Schedule::kFixed : Schedule::kFast;
      for (const Schedules s : {Schedules(Schedule::kFast), Schedules(Schedule::kFixed), Schedules(mixed.data())}) {
        float* xd = h_->Put(x);
        Backend::MatMulOutput outs[3];
        for (int i = 0; i < 3; ++i) outs[i] = {&wm[static_cast<size_t>(i)], h_->Alloc(static_cast<size_t>(m * n[i]))};
        ASSERT_TRUE(be_->MatMulShared(xd, m, outs, s).ok());
        for (int i = 0; i < 3; ++i) {
          const std::vector<float> alone = h_->MatMul(x, m, wm[static_cast<size_t>(i)], s);
          const std::vector<float> got = h_->Get(outs[i].y, alone.size());
          for (int64_t r = 0; r < m; ++r) {
            const size_t at = static_cast<size_t>(r * n[i]);
            const std::string where = absl::StrCat(GetGgmlTypeInfo(static_cast<uint32_t>(type))->name, " m ", m,
                                                   " matrix ", i, " row ", r);
            if (s[r] == Schedule::kFixed) {
              ASSERT_TRUE(SameBits(got.data() + at, alone.data() + at, static_cast<size_t>(n[i]))) << where;
              continue;
            }
            for (size_t j = at; j < at + static_cast<size_t>(n[i]); ++j) {
              ASSERT_NEAR(got[j], alone[j], 1e-4 * (1 + std::fabs(alone[j]))) << where;
            }
          }
        }
      }
    }
    const TestMatrix narrow = MakeMatrix(type, 8, 64, rng);
    const WeightMatrix nm = Upload(type, narrow, 8, 64);
    float* y0 = h_->Alloc(37);
    float* y1 = h_->Alloc(8);
    const Backend::MatMulOutput bad[2] = {{&wm[0], y0}, {&nm, y1}};
    EXPECT_EQ(be_->MatMulShared(h_->Put(RandomVector(96, 1)), 1, bad, Schedule::kFixed).code(),
              absl::StatusCode::kInvalidArgument);
  }
}

// Matrices uploaded together (UploadWeights: a layer's query/key/value and gate/up projections)
// and taken together by MatMulShared, which may run them as one matrix (CUDA does): a fixed
// row has the same bits in every batch (1, 3 or 40 rows, and beside fast rows), and every
// output agrees with its matrix's MatMul within rounding — to the bit on the CPU, which
// uploads each alone. Taken in another order they are no group, and each is MatMul's.
TEST_P(BackendOpsTest, MatMulSharedOfWeightsUploadedTogether) {
  std::mt19937 rng(53);
  for (GgmlType type : {GgmlType::kBF16, GgmlType::kQ8_0}) {
    const int64_t cols = 96, full = 40, n[3] = {37, 50, 13};
    std::vector<TestMatrix> w;
    w.reserve(3);
    std::vector<WeightMatrix> host, alone;
    for (int i = 0; i < 3; ++i) {
      w.push_back(MakeMatrix(type, n[i], cols, rng));
      host.push_back(WeightMatrix{type, w.back().bytes.data(), n[i], cols, w.back().row_bytes});
      alone.push_back(Upload(type, w.back(), n[i], cols));
    }
    const std::vector<const WeightMatrix*> hosts = {&host[0], &host[1], &host[2]};
    auto together = be_->UploadWeights(hosts);
    ASSERT_TRUE(together.ok()) << together.status();
    const std::vector<float> x = RandomVector(static_cast<size_t>(full * cols), 61);
    // Each matrix's outputs for the first m rows of x, taking the matrices in `order`.
    auto run = [&](int64_t m, Schedules s, const std::vector<int>& order) {
      float* xd = h_->Put(std::vector<float>(x.begin(), x.begin() + m * cols));
      std::vector<Backend::MatMulOutput> outs;
      for (int i : order) outs.push_back({&(*together)[static_cast<size_t>(i)], h_->Alloc(static_cast<size_t>(m * n[i]))});
      EXPECT_TRUE(be_->MatMulShared(xd, m, outs, s).ok());
      std::vector<std::vector<float>> y(3);
      for (size_t j = 0; j < order.size(); ++j) {
        y[static_cast<size_t>(order[j])] = h_->Get(outs[j].y, static_cast<size_t>(m * n[order[j]]));
      }
      return y;
    };
    const std::string name = GetGgmlTypeInfo(static_cast<uint32_t>(type))->name;
    const auto fixed = run(full, Schedule::kFixed, {0, 1, 2});
    std::vector<Schedule> mixed(static_cast<size_t>(full));
    for (size_t i = 0; i < mixed.size(); ++i) mixed[i] = i % 3 == 0 ? Schedule::kFixed : Schedule::kFast;
    const auto beside_fast = run(full, Schedules(mixed.data()), {0, 1, 2});
    for (int64_t m : {int64_t{1}, int64_t{3}}) {
      const auto fewer = run(m, Schedule::kFixed, {0, 1, 2});
      for (int i = 0; i < 3; ++i) {
        EXPECT_TRUE(SameBits(fewer[static_cast<size_t>(i)].data(), fixed[static_cast<size_t>(i)].data(),
                             static_cast<size_t>(m * n[i])))
            << name << " matrix " << i << ": " << m << " fixed rows differ from the same rows among " << full;
      }
    }
    for (int i = 0; i < 3; ++i) {
      const auto& f = fixed[static_cast<size_t>(i)];
      for (int64_t r = 0; r < full; r += 3) {
        EXPECT_TRUE(SameBits(beside_fast[static_cast<size_t>(i)].data() + r * n[i], f.data() + r * n[i],
                             static_cast<size_t>(n[i])))
            << name << " matrix " << i << " row " << r << ": a fixed row beside fast rows";
      }
      const std::vector<float> own = h_->MatMul(x, full, alone[static_cast<size_t>(i)], Schedule::kFixed);
      if (GetParam() == "cpu") {
        EXPECT_TRUE(SameBits(f.data(), own.data(), own.size())) << name << " matrix " << i;
        continue;
      }
      for (size_t j = 0; j < own.size(); ++j) {
        ASSERT_NEAR(f[j], own[j], 1e-4 * (1 + std::fabs(own[j]))) << name << " matrix " << i << " output " << j;
      }
    }
    // Another order: no group, each matrix's own MatMul.
    const auto reordered = run(full, Schedule::kFixed, {1, 0, 2});
    for (int i = 0; i < 3; ++i) {
      const std::vector<float> own = h_->MatMul(x, full, (*together)[static_cast<size_t>(i)], Schedule::kFixed);
      EXPECT_TRUE(SameBits(reordered[static_cast<size_t>(i)].data(), own.data(), own.size()))
          << name << " matrix " << i << " taken out of order";
    }
  }
}

// Both schedules against float64, over contexts within one KV block and across many, and
// across the CPU's fixed chunk (256).
TEST_P(BackendOpsTest, AttentionMatchesFloat64Reference) {
  AttentionFixture f(*be_, {1, 37, 300});
  const std::vector<float> q = RandomVector(3 * 4 * 64, 3);
  const std::vector<std::pair<int, int32_t>> rows = {{0, 0}, {1, 36}, {2, 299}, {2, 17}};
  for (Schedule s : {Schedule::kFast, Schedule::kFixed}) {
    f.ExpectMatchesReference(rows, q, f.Run(rows, q, s), GetParam() == "cpu" ? 1e-5 : 2e-3,
                             s == Schedule::kFixed ? "fixed" : "fast");
  }
}

// With a sink logit per head (gpt-oss's), whose exp joins each softmax's sum: decode rows (the
// heads kernel) and a sequence's rows together (the blocked kernels), both schedules, against
// float64. Sinks of 5 and 2 take most and some of a head's weight from scores about N(0, 1); the
// reference fails by far with them left out (checked). Only the CPU runs sinks: another backend
// must refuse them (UNIMPLEMENTED, as CUDA does; models with them have experts, which are refused
// there before any attention), never compute attention without them.
TEST_P(BackendOpsTest, AttentionWithSinksMatchesFloat64Reference) {
  AttentionFixture f(*be_, {1, 37, 300});
  f.set_sinks({5.0f, 2.0f, -1.0f, 0.5f});
  const std::vector<float> q = RandomVector(3 * 4 * 64, 3);
  const std::vector<std::pair<int, int32_t>> rows = {{0, 0}, {1, 36}, {2, 299}, {2, 17}};
  if (GetParam() != "cpu") {
    f.expect_refusal(true);
    f.Run(rows, q, Schedule::kFixed);
    EXPECT_EQ(f.last_status().code(), absl::StatusCode::kUnimplemented) << f.last_status();
    return;
  }
  for (Schedule s : {Schedule::kFast, Schedule::kFixed}) {
    f.ExpectMatchesReference(rows, q, f.Run(rows, q, s), 1e-5, s == Schedule::kFixed ? "fixed" : "fast");
  }
}

// Storage layers of different widths (Gemma 4's sliding and global layers, KvShape::layer_dims):
// a middle layer of 128 between layers of 64 and 256, the others written after it, attends to its
// own keys and values only; each alone, then the Columns op that packs per-layer inputs.
TEST_P(BackendOpsTest, AttentionOverLayersOfDifferentWidths) {
  AttentionFixture f(*be_, {1, 37, 300}, 1, {64, AttentionFixture::kKvDim, 256});
  const std::vector<float> q = RandomVector(3 * 4 * 64, 3);
  const std::vector<std::pair<int, int32_t>> rows = {{0, 0}, {1, 36}, {2, 299}, {2, 17}};
  for (Schedule s : {Schedule::kFast, Schedule::kFixed}) {
    f.ExpectMatchesReference(rows, q, f.Run(rows, q, s), GetParam() == "cpu" ? 1e-5 : 2e-3,
                             s == Schedule::kFixed ? "fixed" : "fast");
  }
}

TEST_P(BackendOpsTest, ColumnsPacksPartOfEachRow) {
  Backend& be = *be_;
  const std::vector<float> x = RandomVector(3 * 10, 8);
  float* out = h_->Alloc(3 * 4);
  ASSERT_TRUE(be.Columns(h_->Put(x) + 5, 3, 10, 4, out).ok());
  const std::vector<float> got = h_->Get(out, 12);
  for (int r = 0; r < 3; ++r) {
    for (int j = 0; j < 4; ++j) EXPECT_EQ(got[r * 4 + j], x[r * 10 + 5 + j]) << r << " " << j;
  }
  EXPECT_FALSE(be.Columns(h_->Put(x), 3, 4, 5, out).ok());  // more columns than a row has
}

// The recurrent layers' ops (Qwen3.5's gated DeltaNet) against float64: CausalConv (a 4-wide
// window, SiLU) and DeltaRule (L2-normalized queries and keys, each value head h reading key head
// h % 2, decays exp(softplus(alpha + dt_bias) * a), rates sigmoid(beta)) over two sequences of 5 and
// 3 rows from zeros in one batch; then the first sequence's rows again in two batches, the second
// continuing from a snapshot the first left (RecurrentRow::from, ::snapshot): the same bits, as a
// prompt chunk and decode steps must give. A backend without them (runs_recurrent false) must
// refuse them as UNIMPLEMENTED, which a model with recurrent layers reports at load.
TEST_P(BackendOpsTest, RecurrentOpsMatchFloat64ReferenceAndChunksAgree) {
  Backend& be = *be_;
  constexpr int64_t kKernel = 4, kKeyHeads = 2, kValueHeads = 4, kDim = 8;
  const DeltaRuleShape shape{kKeyHeads, kValueHeads, kDim, 1e-6f};
  const int64_t ch = shape.conv_channels(), out_w = kValueHeads * kDim;
  if (!be.runs_recurrent()) {  // a backend without them (CUDA so far) says so, never runs them wrongly
    EXPECT_EQ(be.AllocateRecurrent(RecurrentShape{2, 6, kKernel, ch, kValueHeads, kDim}).code(),
              absl::StatusCode::kUnimplemented);
    return;
  }
  ASSERT_TRUE(be.AllocateRecurrent(RecurrentShape{2, 6, kKernel, ch, kValueHeads, kDim}).ok());
  const int64_t m = 8;
  const std::vector<float> x = RandomVector(static_cast<size_t>(m * ch), 21), w = RandomVector(static_cast<size_t>(ch * kKernel), 22);
  const std::vector<float> alpha = RandomVector(static_cast<size_t>(m * kValueHeads), 23);
  const std::vector<float> beta = RandomVector(static_cast<size_t>(m * kValueHeads), 24);
  const std::vector<float> dt = RandomVector(kValueHeads, 25);
  std::vector<float> a = RandomVector(kValueHeads, 26);
  for (float& v : a) v = -0.2f - 0.5f * std::fabs(v);
  const float* dw = h_->Put(w);
  const float* d_dt = h_->Put(dt);
  const float* d_a = h_->Put(a);
  // Rows [begin, end) of the batch (whose first rows are sequence 0's 5, then sequence 1's 3), in
  // the slots `rows` says: conv then delta rule, returning both outputs.
  int32_t table[1] = {0};
  auto run = [&](int64_t begin, int64_t end, const std::vector<RecurrentRow>& rows) {
    const auto n = static_cast<size_t>(end - begin);
    std::vector<int32_t> tokens(n, 0), positions(n);
    std::vector<const int32_t*> tables(n, table);
    for (size_t i = 0; i < n; ++i) positions[i] = static_cast<int32_t>(begin + static_cast<int64_t>(i));
    EXPECT_TRUE(be.BeginBatch(BatchPlan{tokens, positions, tables, Schedule::kFixed, rows}).ok());
    float* conv = h_->Alloc(n * static_cast<size_t>(ch));
    float* out = h_->Alloc(n * static_cast<size_t>(out_w));
    const std::vector<float> xs(x.begin() + begin * ch, x.begin() + end * ch);
    const std::vector<float> al(alpha.begin() + begin * kValueHeads, alpha.begin() + end * kValueHeads);
    const std::vector<float> be_(beta.begin() + begin * kValueHeads, beta.begin() + end * kValueHeads);
    EXPECT_TRUE(be.CausalConv(1, h_->Put(xs), dw, conv).ok());
    EXPECT_TRUE(be.DeltaRule(1, {shape, conv, h_->Put(al), h_->Put(be_), d_dt, d_a}, out).ok());
    return std::make_pair(h_->Get(conv, n * static_cast<size_t>(ch)), h_->Get(out, n * static_cast<size_t>(out_w)));
  };
  constexpr int32_t kZero = RecurrentRow::kZeroState, kNone = RecurrentRow::kNone;
  const auto [conv, out] = run(0, 8, {{0, kZero}, {0}, {0}, {0}, {0}, {1, kZero}, {1}, {1}});
  // float64, token by token per sequence.
  auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  double worst = 0;
  for (int seq = 0; seq < 2; ++seq) {
    const int64_t first = seq == 0 ? 0 : 5, last = seq == 0 ? 5 : 8;
    std::vector<double> win(static_cast<size_t>((kKernel - 1) * ch), 0.0);
    std::vector<double> st(static_cast<size_t>(kValueHeads * kDim * kDim), 0.0);
    for (int64_t r = first; r < last; ++r) {
      std::vector<double> y(static_cast<size_t>(ch));
      for (int64_t c = 0; c < ch; ++c) {
        double sum = 0;
        for (int64_t i = 0; i < kKernel - 1; ++i) sum += win[static_cast<size_t>(i * ch + c)] * w[static_cast<size_t>(c * kKernel + i)];
        sum += x[static_cast<size_t>(r * ch + c)] * w[static_cast<size_t>(c * kKernel + kKernel - 1)];
        y[static_cast<size_t>(c)] = sum * sig(sum);
        for (int64_t i = 0; i + 1 < kKernel - 1; ++i) win[static_cast<size_t>(i * ch + c)] = win[static_cast<size_t>((i + 1) * ch + c)];
        win[static_cast<size_t>((kKernel - 2) * ch + c)] = x[static_cast<size_t>(r * ch + c)];
        worst = std::max(worst, std::fabs(conv[static_cast<size_t>(r * ch + c)] - y[static_cast<size_t>(c)]) / (1 + std::fabs(y[static_cast<size_t>(c)])));
      }
      auto l2 = [&](int64_t at) {
        std::vector<double> v(y.begin() + at, y.begin() + at + kDim);
        double ss = 1e-6;
        for (double e : v) ss += e * e;
        for (double& e : v) e /= std::sqrt(ss);
        return v;
      };
      for (int64_t h = 0; h < kValueHeads; ++h) {
        const std::vector<double> q = l2((h % kKeyHeads) * kDim), k = l2((kKeyHeads + h % kKeyHeads) * kDim);
        const double* v = y.data() + (2 * kKeyHeads + h) * kDim;
        const double al = alpha[static_cast<size_t>(r * kValueHeads + h)] + dt[static_cast<size_t>(h)];
        const double decay = std::exp(std::log1p(std::exp(al)) * a[static_cast<size_t>(h)]);
        const double rate = sig(beta[static_cast<size_t>(r * kValueHeads + h)]);
        double* S = st.data() + h * kDim * kDim;
        for (int64_t i = 0; i < kDim * kDim; ++i) S[i] *= decay;
        for (int64_t j = 0; j < kDim; ++j) {
          double sk = 0;
          for (int64_t i = 0; i < kDim; ++i) sk += S[i * kDim + j] * k[static_cast<size_t>(i)];
          const double delta = (v[j] - sk) * rate;
          for (int64_t i = 0; i < kDim; ++i) S[i * kDim + j] += k[static_cast<size_t>(i)] * delta;
        }
        for (int64_t j = 0; j < kDim; ++j) {
          double o = 0;
          for (int64_t i = 0; i < kDim; ++i) o += S[i * kDim + j] * q[static_cast<size_t>(i)];
          o /= std::sqrt(static_cast<double>(kDim));
          worst = std::max(worst, std::fabs(out[static_cast<size_t>(r * out_w + h * kDim + j)] - o) / (1 + std::fabs(o)));
        }
      }
    }
  }
  EXPECT_LE(worst, GetParam() == "cpu" ? 1e-5 : 2e-3);
  // Sequence 0 in two batches: rows 0-2 into slot 2 leaving a snapshot in slot 4 after row 2, then
  // rows 3-4 into slot 3 from that snapshot.
  const auto [conv_a, out_a] = run(0, 3, {{2, kZero}, {2}, {2, kNone, 4}});
  const auto [conv_b, out_b] = run(3, 5, {{3, 4}, {3}});
  std::vector<float> conv_ab = conv_a, out_ab = out_a;
  conv_ab.insert(conv_ab.end(), conv_b.begin(), conv_b.end());
  out_ab.insert(out_ab.end(), out_b.begin(), out_b.end());
  EXPECT_TRUE(SameBits(conv_ab.data(), conv.data(), static_cast<size_t>(5 * ch)));
  EXPECT_TRUE(SameBits(out_ab.data(), out.data(), static_cast<size_t>(5 * out_w)));
  // Slots out of range and a run's rows apart are refused.
  std::vector<int32_t> two(2, 0);
  std::vector<const int32_t*> tables(2, table);
  EXPECT_FALSE(be.BeginBatch(BatchPlan{two, two, tables, Schedule::kFixed, std::vector<RecurrentRow>{{6}, {0}}}).ok());
  std::vector<int32_t> three(3, 0);
  std::vector<const int32_t*> tables3(3, table);
  EXPECT_FALSE(be.BeginBatch(BatchPlan{three, three, tables3, Schedule::kFixed,
                                       std::vector<RecurrentRow>{{0}, {1}, {0}}}).ok());
}

// Prefill chunks (rows of one sequence at consecutive positions, which a device may run as
// query tiles: lib/backend/attention_splits.h) against float64: 100 rows from position 0 (three
// full tiles and a short one), 30 rows from position 40 of another sequence, and a decode row
// beside them, under both schedules.
TEST_P(BackendOpsTest, PrefillChunkAttentionMatchesFloat64Reference) {
  AttentionFixture f(*be_, {300, 70});
  const std::vector<float> q = RandomVector(2 * 4 * 64, 5);
  std::vector<std::pair<int, int32_t>> rows;
  for (int32_t p = 0; p < 100; ++p) rows.push_back({0, p});
  for (int32_t p = 40; p < 70; ++p) rows.push_back({1, p});
  rows.push_back({0, 299});
  for (Schedule s : {Schedule::kFast, Schedule::kFixed}) {
    f.ExpectMatchesReference(rows, q, f.Run(rows, q, s), GetParam() == "cpu" ? 1e-5 : 2e-3,
                             s == Schedule::kFixed ? "fixed" : "fast");
  }
}

// Item 8 for attention: KV lengths straddling block (16), chunk and split (a fixed row splits
// every kFixedAttentionSpan = 256 positions on a device) boundaries; each row alone, in a batch
// of other rows, and beside a chunk of 50 rows of its own sequence: the same bits. On CUDA the
// device script runs it again with split rows' partial states in waves
// (LLM42_CUDA_ATTENTION_SCRATCH_BYTES).
TEST_P(BackendOpsTest, FixedAttentionIsRowInvariant) {
  const std::vector<int64_t> lens = {1, 15, 16, 17, 255, 256, 257, 600, 1300};
  AttentionFixture f(*be_, lens);
  const std::vector<float> q = RandomVector(lens.size() * 4 * 64, 4);
  std::vector<std::pair<int, int32_t>> all;
  for (size_t i = 0; i < lens.size(); ++i) all.push_back({static_cast<int>(i), static_cast<int32_t>(lens[i] - 1)});
  const std::vector<float> batch = f.Run(all, q, Schedule::kFixed);
  std::vector<std::pair<int, int32_t>> chunk = all;
  for (int32_t p = 1250; p < 1300; ++p) chunk.push_back({8, p});
  const std::vector<float> beside = f.Run(chunk, q, Schedule::kFixed);
  for (size_t i = 0; i < all.size(); ++i) {
    const std::vector<float> alone = f.Run({all[i]}, q, Schedule::kFixed);
    EXPECT_TRUE(SameBits(alone.data(), batch.data() + i * 256, 256)) << "length " << lens[i];
    EXPECT_TRUE(SameBits(alone.data(), beside.data() + i * 256, 256)) << "length " << lens[i] << " beside a chunk";
  }
  EXPECT_TRUE(SameBits(beside.data() + (all.size() + 49) * 256, beside.data() + 8 * 256, 256))
      << "a chunk's last row and the same query at the same position";
}

// AddRmsNorm (one kernel on CUDA) gives the bits of Add then RmsNorm, in x and in y, for rows
// of a model's width and of one not a multiple of the block's threads; the norm checked against
// float64 too. Fails when the norm is taken before the add (checked on the default the CPU runs).
TEST_P(BackendOpsTest, AddRmsNormIsAddThenRmsNorm) {
  Backend& be = *be_;
  for (int64_t n : {int64_t{4096}, int64_t{1000}}) {
    const int64_t m = 3;
    const std::vector<float> x = RandomVector(static_cast<size_t>(m * n), 31), add = RandomVector(x.size(), 32),
                             w = RandomVector(static_cast<size_t>(n), 33);
    const float* dw = h_->Put(w);
    float* x2 = h_->Put(x);
    float* y2 = h_->Alloc(x.size());
    ASSERT_TRUE(be.Add(x2, h_->Put(add), x.size()).ok());
    ASSERT_TRUE(be.RmsNorm(x2, dw, m, n, 1e-5f, y2, Schedule::kFixed).ok());
    float* x1 = h_->Put(x);
    float* y1 = h_->Alloc(x.size());
    ASSERT_TRUE(be.AddRmsNorm(x1, h_->Put(add), dw, m, n, 1e-5f, y1, Schedule::kFixed).ok());
    const std::vector<float> sum_two = h_->Get(x2, x.size()), sum_one = h_->Get(x1, x.size());
    const std::vector<float> norm_two = h_->Get(y2, x.size()), norm_one = h_->Get(y1, x.size());
    EXPECT_TRUE(SameBits(sum_two.data(), sum_one.data(), x.size())) << "x, n = " << n;
    EXPECT_TRUE(SameBits(norm_two.data(), norm_one.data(), x.size())) << "y, n = " << n;
    for (int64_t r = 0; r < m; ++r) {
      double squares = 0;
      for (int64_t j = 0; j < n; ++j) {
        const double v = static_cast<double>(x[r * n + j]) + add[r * n + j];
        squares += v * v;
      }
      const double scale = 1 / std::sqrt(squares / static_cast<double>(n) + 1e-5);
      for (int64_t j = 0; j < n; ++j) {
        const double v = static_cast<double>(x[r * n + j]) + add[r * n + j];
        ASSERT_NEAR(norm_one[r * n + j], v * scale * w[j], 1e-4) << "row " << r << " n = " << n;
      }
    }
  }
}

// RopeStoreKv (one kernel on CUDA) gives the bits of Rope on q, Rope on k and StoreKv: the
// rotated q and k, and every byte of the KV blocks; for a full rotation and a partial NeoX one
// with frequency factors, at positions across blocks. Fails when the key is stored before it is
// rotated (checked on the default the CPU runs; the CUDA kernel runs on a device only).
TEST_P(BackendOpsTest, RopeStoreKvIsRopeThenStoreKv) {
  Backend& be = *be_;
  const AttentionShape shape{4, 2, 64};
  const int64_t kv_dim = shape.n_head_kv * shape.head_dim;
  const KvShape kv{1, 6, 16, kv_dim};
  ASSERT_TRUE(be.AllocateKv(kv).ok());
  const std::vector<int32_t> positions = {0, 5, 17, 40}, tokens(4, 0);
  const int32_t t0[] = {0}, t1[] = {1}, t2[] = {2, 3}, t3[] = {4, 5, 0};
  const int32_t* tables[] = {t0, t1, t2, t3};
  const std::vector<float> q = RandomVector(4 * 4 * 64, 21), k = RandomVector(4 * kv_dim, 22),
                           v = RandomVector(4 * kv_dim, 23);
  for (bool neox : {false, true}) {
    RopeParams rope;
    rope.n_rot = neox ? 32 : 64;
    rope.neox = neox;
    rope.freq_base = 10000.0f;
    std::vector<float> factors;
    for (int i = 0; i < 16; ++i) factors.push_back(1.0f + 0.2f * static_cast<float>(i));
    if (neox) rope.freq_factors = h_->Put(factors);
    auto run = [&](bool fused) {
      std::vector<std::vector<float>> got;
      EXPECT_TRUE(be.BeginBatch(BatchPlan{tokens, positions, tables, Schedule::kFixed}).ok());
      float* dq = h_->Put(q);
      float* dk = h_->Put(k);
      const float* dv = h_->Put(v);
      if (fused) {
        EXPECT_TRUE(be.RopeStoreKv(0, dq, dk, dv, shape, rope, Schedule::kFixed).ok());
      } else {
        EXPECT_TRUE(be.Rope(dq, shape.n_head, shape.head_dim, rope, Schedule::kFixed).ok());
        EXPECT_TRUE(be.Rope(dk, shape.n_head_kv, shape.head_dim, rope, Schedule::kFixed).ok());
        EXPECT_TRUE(be.StoreKv(0, dk, dv).ok());
      }
      got.push_back(h_->Get(dq, q.size()));
      got.push_back(h_->Get(dk, k.size()));
      std::vector<uint8_t> block(static_cast<size_t>(kv.block_elements()) * be.kv_element_bytes());
      std::vector<float> blocks;
      for (int32_t b = 0; b < kv.n_blocks; ++b) {
        EXPECT_TRUE(be.ReadKvBlock(b, block).ok());
        const size_t at = blocks.size();
        blocks.resize(at + (block.size() + 3) / 4);
        std::memcpy(blocks.data() + at, block.data(), block.size());
      }
      got.push_back(std::move(blocks));
      return got;
    };
    const auto three = run(false), one = run(true);
    EXPECT_FALSE(SameBits(three[0].data(), q.data(), q.size())) << "the rotation was meant to change q";
    for (size_t i = 0; i < three.size(); ++i) {
      ASSERT_EQ(three[i].size(), one[i].size());
      EXPECT_TRUE(SameBits(three[i].data(), one[i].data(), three[i].size()))
          << (neox ? "neox: " : "") << (i == 0 ? "q" : i == 1 ? "k" : "the KV blocks");
    }
  }
}

TEST_P(BackendOpsTest, RmsNormRopeSwiGluAndAdds) {
  Backend& be = *be_;
  {
    const std::vector<float> x = {1, 2, 3, 4, -1, 0, 0, 1}, w = {1, 1, 2, 0.5f};
    float* y = h_->Alloc(8);
    ASSERT_TRUE(be.RmsNorm(h_->Put(x), h_->Put(w), 2, 4, 0.0f, y, Schedule::kFixed).ok());
    const std::vector<float> got = h_->Get(y, 8);
    const double inv = 1 / std::sqrt(30.0 / 4), inv2 = 1 / std::sqrt(2.0 / 4);
    EXPECT_NEAR(got[2], 3 * inv * 2, 1e-6);
    EXPECT_NEAR(got[3], 4 * inv * 0.5, 1e-6);
    EXPECT_NEAR(got[4], -1 * inv2, 1e-6);
    EXPECT_NEAR(got[7], 1 * inv2 * 0.5, 1e-6);
  }
  {
    // RoPE rotates pair i by pos * base^(-2i/n_rot); dims past n_rot stay.
    const std::vector<int32_t> tokens = {0}, positions = {3};
    const int32_t table[1] = {0};
    const int32_t* tables[1] = {table};
    ASSERT_TRUE(be.BeginBatch(BatchPlan{tokens, positions, tables, Schedule::kFixed}).ok());
    RopeParams rp;
    rp.n_rot = 4;
    rp.freq_base = 100.0f;
    float* r = h_->Put({1, 0, 1, 0, 7, 7});
    ASSERT_TRUE(be.Rope(r, 1, 6, rp, Schedule::kFixed).ok());
    std::vector<float> got = h_->Get(r, 6);
    EXPECT_NEAR(got[0], std::cos(3.0), 1e-6);
    EXPECT_NEAR(got[1], std::sin(3.0), 1e-6);
    EXPECT_NEAR(got[2], std::cos(3.0 / 10), 1e-6);
    EXPECT_NEAR(got[3], std::sin(3.0 / 10), 1e-6);
    EXPECT_EQ(got[4], 7);
    // NeoX pairs (i, i + n_rot/2); frequency factors divide each pair's angle; freq_scale
    // scales positions.
    rp.neox = true;
    rp.freq_factors = h_->Put({1.0f, 4.0f});
    rp.freq_scale = 0.5f;
    float* n = h_->Put({1, 1, 0, 0, 7, 7});
    ASSERT_TRUE(be.Rope(n, 1, 6, rp, Schedule::kFixed).ok());
    got = h_->Get(n, 6);
    EXPECT_NEAR(got[0], std::cos(1.5), 1e-6);
    EXPECT_NEAR(got[2], std::sin(1.5), 1e-6);
    EXPECT_NEAR(got[1], std::cos(1.5 / 10 / 4), 1e-6);
    EXPECT_NEAR(got[3], std::sin(1.5 / 10 / 4), 1e-6);
    EXPECT_EQ(got[4], 7);
  }
  {
    float* s = h_->Alloc(4);
    ASSERT_TRUE(be.SwiGlu(h_->Put({0, 2, -1, 1}), h_->Put({5, 3, 2, 1}), 2, 2, s, Schedule::kFixed).ok());
    const std::vector<float> got = h_->Get(s, 4);
    EXPECT_EQ(got[0], 0);
    EXPECT_NEAR(got[1], 2 / (1 + std::exp(-2.0)) * 3, 1e-6);
    EXPECT_NEAR(got[2], -1 / (1 + std::exp(1.0)) * 2, 1e-6);
  }
  if (be.runs_experts()) {
    // gpt-oss's clamped SwiGLU (llama.cpp's swiglu_oai, alpha 1.702, limit 7): gates above 7 and
    // ups outside [-7, 7] clamped, up + 1 as the multiplier.
    float* c = h_->Alloc(4);
    ASSERT_TRUE(be.ClampedSwiGlu(h_->Put({9, 2, -3, 1}), h_->Put({5, -9, 8, 0}), 2, 2, 1.702f, 7.0f, c).ok());
    const std::vector<float> got = h_->Get(c, 4);
    auto want = [](double g, double u) { return g / (1 + std::exp(-1.702 * g)) * (u + 1); };
    EXPECT_NEAR(got[0], want(7, 5), 1e-5);
    EXPECT_NEAR(got[1], want(2, -7), 1e-5);
    EXPECT_NEAR(got[2], want(-3, 7), 1e-5);
    EXPECT_NEAR(got[3], want(1, 0), 1e-5);
  }
  {
    float* y = h_->Put({1, 2, 3, 4, 5, 6});
    ASSERT_TRUE(be.AddBias(y, 2, 3, h_->Put({10, 20, 30})).ok());
    ASSERT_TRUE(be.Add(y, h_->Put({1, 1, 1, 1, 1, 0.5f}), 6).ok());
    EXPECT_EQ(h_->Get(y, 6), (std::vector<float>{12, 23, 34, 15, 26, 36.5f}));
    float* g = h_->Alloc(6);
    const std::vector<int32_t> rows = {1, 0, 1};
    ASSERT_TRUE(be.GatherRows(y, 2, rows, g).ok());
    EXPECT_EQ(h_->Get(g, 6), (std::vector<float>{34, 15, 12, 23, 34, 15}));
  }
}

TEST_P(BackendOpsTest, EmbedIsExactAndRowOpsAreRowInvariant) {
  Backend& be = *be_;
  const int64_t n = 264, full = 64;
  std::mt19937 rng(2);
  const TestMatrix table = MakeMatrix(GgmlType::kF16, 300, n, rng);
  const WeightMatrix tm = Upload(GgmlType::kF16, table, 300, n);
  std::vector<int32_t> ids(static_cast<size_t>(full)), positions(static_cast<size_t>(full));
  for (int64_t i = 0; i < full; ++i) {
    ids[static_cast<size_t>(i)] = static_cast<int32_t>((i * 37) % 300);
    positions[static_cast<size_t>(i)] = static_cast<int32_t>(i * 7);
  }
  const int32_t block[64] = {};
  std::vector<const int32_t*> tables(static_cast<size_t>(full), block);
  const std::vector<float> x = RandomVector(static_cast<size_t>(full * n), 8);
  const std::vector<float> w = RandomVector(static_cast<size_t>(n), 9);
  const float* wd = h_->Put(w);
  RopeParams rp;
  rp.n_rot = 64;
  // Embedding rows, RMSNorm, RoPE and SwiGLU of the first m rows of the batch.
  auto run = [&](int64_t m) {
    const auto mn = static_cast<size_t>(m * n);
    EXPECT_TRUE(be.BeginBatch(BatchPlan{std::span(ids).first(static_cast<size_t>(m)),
                                        std::span(positions).first(static_cast<size_t>(m)),
                                        std::span(tables).first(static_cast<size_t>(m)), Schedule::kFixed})
                    .ok());
    float* emb = h_->Alloc(mn);
    float* norm = h_->Alloc(mn);
    float* glu = h_->Alloc(mn);
    float* rope = h_->Put(std::vector<float>(x.begin(), x.begin() + m * n));
    EXPECT_TRUE(be.Embed(tm, emb).ok());
    EXPECT_TRUE(be.RmsNorm(rope, wd, m, n, 1e-5f, norm, Schedule::kFixed).ok());
    EXPECT_TRUE(be.SwiGlu(rope, rope, m, n, glu, Schedule::kFixed).ok());
    EXPECT_TRUE(be.Rope(rope, 4, 66, rp, Schedule::kFixed).ok());
    std::vector<float> out = h_->Get(emb, mn);
    for (const float* d : {norm, glu, rope}) {
      const std::vector<float> part = h_->Get(d, mn);
      out.insert(out.end(), part.begin(), part.end());
    }
    return out;
  };
  const std::vector<float> ref = run(full);
  const auto fn = static_cast<size_t>(full * n);
  for (int64_t i = 0; i < full; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      ASSERT_EQ(ref[static_cast<size_t>(i * n + j)], table.values[static_cast<size_t>(ids[static_cast<size_t>(i)] * n + j)]);
    }
  }
  for (int64_t m : {1, 3, 8, 33}) {
    const std::vector<float> got = run(m);
    const auto mn = static_cast<size_t>(m * n);
    for (size_t part = 1; part < 4; ++part) {
      EXPECT_TRUE(SameBits(got.data() + part * mn, ref.data() + part * fn, mn)) << "op " << part << " m " << m;
    }
  }
}

// ArgmaxRows (a greedy draw's row summary, computed where the logits are) follows
// lib/numerics/argmax.h's rule to the bit: the rule's cases spelled out (ties to the lowest id,
// NaN never best except at id 0, -inf rows, one column), then long random rows, picked out of
// order, against the host's scan. A kernel that broke ties upward, let NaN win or read the wrong
// row fails here.
TEST_P(BackendOpsTest, ArgmaxRowsFollowTheHostRule) {
  Backend& be = *be_;
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> cases = {
      1, 3, 3, 2, 0,                   // tie: the lower id
      nan, 1, 5, nan, 2,               // NaN at id 0 stays the best; second the largest other
      -inf, -inf, -inf, -inf, -inf,    // nothing greater than id 0
      0, nan, 4, 4, nan,               // NaN elsewhere never counts
      -1, -0.5f, -2, -0.5f, -3,        // negative tie
      2, 1, 0, -1, 7,                  // the last
  };
  const ArgmaxSummary want[] = {{1, 3, 3}, {0, nan, 5}, {0, -inf, -inf}, {2, 4, 4}, {1, -0.5f, -0.5f}, {4, 7, 2}};
  const std::vector<int32_t> all = {0, 1, 2, 3, 4, 5};
  std::vector<ArgmaxSummary> got(all.size());
  ASSERT_TRUE(be.ArgmaxRows(h_->Put(cases), 5, all, got.data()).ok());
  for (size_t r = 0; r < all.size(); ++r) {
    EXPECT_EQ(got[r].id, want[r].id) << "case " << r;
    EXPECT_TRUE(SameBits(&got[r].best, &want[r].best, 1)) << "case " << r << ": " << got[r].best;
    EXPECT_EQ(got[r].second, want[r].second) << "case " << r;
  }
  const std::vector<int32_t> one_row = {0};
  ASSERT_TRUE(be.ArgmaxRows(h_->Put(std::vector<float>{5}), 1, one_row, got.data()).ok());
  EXPECT_EQ(got[0].id, 0);
  EXPECT_EQ(got[0].best, 5);
  EXPECT_EQ(got[0].second, -inf);

  const int64_t n = 128259;  // a vocabulary, and not a multiple of any block
  std::vector<float> rows = RandomVector(static_cast<size_t>(4 * n), 21);
  rows[static_cast<size_t>(2 * n + 77777)] = 9;  // a tie at the top of row 2, the later id
  rows[static_cast<size_t>(2 * n + 99999)] = 9;
  const std::vector<int32_t> picked = {3, 0, 2};
  ASSERT_TRUE(be.ArgmaxRows(h_->Put(rows), n, picked, got.data()).ok());
  for (size_t r = 0; r < picked.size(); ++r) {
    const ArgmaxSummary host =
        SummarizeArgmax(std::span(rows).subspan(static_cast<size_t>(picked[r] * n), static_cast<size_t>(n)));
    EXPECT_EQ(got[r].id, host.id) << "row " << picked[r];
    EXPECT_TRUE(SameBits(&got[r].best, &host.best, 1)) << "row " << picked[r];
    EXPECT_EQ(got[r].second, host.second) << "row " << picked[r];
  }
  EXPECT_EQ(got[2].id, 77777);
  EXPECT_EQ(got[2].second, 9);
}

// DrawRows (a sampled draw computed where the logits are) gives the host sampler's token, margin,
// logprob and top logprobs to the bit (lib/sampling/sampler.h, a sorted walk; the backend runs
// lib/numerics/draw_rule.h's selection): vocabulary-sized rows picked out of order, every filter,
// a row of ties. A device compiled with fused multiply-adds, a histogram that lost an atomic add
// or a reduction left to the order of additions fails here.
TEST_P(BackendOpsTest, DrawRowsGiveTheHostSamplersBits) {
  Backend& be = *be_;
  const int64_t n = 128259;
  std::vector<float> rows = RandomVector(static_cast<size_t>(4 * n), 23);
  for (int64_t i = 0; i < n; ++i) rows[static_cast<size_t>(3 * n + i)] = static_cast<float>(i % 5);  // ties
  for (float& x : rows) x *= 4;  // model-like spread
  std::vector<RowDraw> draws;
  const float knobs[][4] = {{0.8f, 0, 1.0f, 0.0f}, {1.0f, 40, 1.0f, 0.0f}, {0.7f, 0, 0.9f, 0.05f},
                            {1.5f, 50, 0.95f, 0.0f}};
  for (int k = 0; k < 4; ++k) {
    for (int32_t row : {2, 0, 3}) {
      RowDraw d;
      d.row = row;
      d.top_n = k == 0 ? 0 : 5 * k;
      d.position = static_cast<uint64_t>(100 * k + row);
      d.params.temperature = knobs[k][0];
      d.params.top_k = static_cast<int32_t>(knobs[k][1]);
      d.params.top_p = knobs[k][2];
      d.params.min_p = knobs[k][3];
      d.params.seed = 1000 + static_cast<uint64_t>(k);
      draws.push_back(d);
    }
  }
  std::vector<DrawnRow> got(draws.size());
  ASSERT_TRUE(be.DrawRows(h_->Put(rows), n, draws, got.data()).ok());
  for (size_t r = 0; r < draws.size(); ++r) {
    const RowDraw& d = draws[r];
    const std::span<const float> row = std::span(rows).subspan(static_cast<size_t>(d.row * n), static_cast<size_t>(n));
    const SampledToken host = SampleWithMargin(row, d.params, static_cast<int64_t>(d.position));
    EXPECT_EQ(got[r].draw.token, host.token) << "draw " << r;
    EXPECT_EQ(got[r].draw.margin, host.margin) << "draw " << r;
    const LogSoftmax lp(row);
    const float want = lp(row[static_cast<size_t>(host.token)]);
    EXPECT_TRUE(SameBits(&got[r].logprob, &want, 1)) << "draw " << r << ": " << got[r].logprob << " " << want;
    std::vector<TopLogprob> top;
    AppendTopLogprobs(row, d.top_n, lp, &top);
    ASSERT_EQ(got[r].top_n, d.top_n);
    for (int32_t i = 0; i < d.top_n; ++i) {
      EXPECT_EQ(got[r].top_ids[i], top[static_cast<size_t>(i)].token) << "draw " << r << " rank " << i;
      EXPECT_TRUE(SameBits(&got[r].top_logprobs[i], &top[static_cast<size_t>(i)].logprob, 1)) << "draw " << r;
    }
  }
  // Greedy rows and too many top tokens are refused.
  RowDraw greedy;
  EXPECT_EQ(be.DrawRows(h_->Put(rows), n, std::span(&greedy, 1), got.data()).code(), absl::StatusCode::kInvalidArgument);
  draws[0].top_n = kMaxTopLogprobs + 1;
  EXPECT_EQ(be.DrawRows(h_->Put(rows), n, std::span(draws.data(), 1), got.data()).code(),
            absl::StatusCode::kInvalidArgument);
}

// ControlRows (a request's controls applied where its logits are) gives llama.cpp's bias and
// penalties and the grammar's mask to the bit, written out here as the rule says (a logit seen c
// times: divided by the repetition penalty when positive, else multiplied, then lowered by
// c * frequency + presence; -infinity where the mask's bit is clear): rows picked out of order,
// one left alone, -0 logits under a repetition penalty alone (which keeps them -0, where a +0
// bias would make them +0), a mask with a partial last word. A device compiled with fused
// multiply-adds (c * frequency + presence), an edit applied to a refused token after the mask,
// or a mask read a word off fails here; so does adding a bias of 0 to the penalized tokens
// (checked on the CPU).
TEST_P(BackendOpsTest, ControlRowsGiveTheRulesBits) {
  Backend& be = *be_;
  const int64_t n = 128259;
  std::vector<float> rows = RandomVector(static_cast<size_t>(5 * n), 29);
  for (float& x : rows) x *= 4;
  for (int64_t i = 0; i < 5 * n; i += 97) rows[static_cast<size_t>(i)] = -0.0f;
  LogitControls c;
  c.repetition_penalty = 1.3f;
  c.frequency_penalty = 0.37f;
  c.presence_penalty = 0.11f;
  c.penalty_last_n = 0;
  for (int32_t t : {5, 97, 194, 1000, 128258}) c.SetBias(t, t == 1000 ? -INFINITY : 0.7f * static_cast<float>(t % 7) - 1.9f);
  std::vector<int32_t> history;
  for (int i = 0; i < 300; ++i) history.push_back(static_cast<int32_t>((i * 7919) % 2000) * (i % 3 == 0 ? 64 : 1));
  std::vector<LogitEdit> edits;
  LogitEditsOf(c, history, n, &edits);
  LogitControls repeat_only;  // row 1, whose penalized logits are zeros of both signs
  repeat_only.repetition_penalty = 1.3f;
  repeat_only.penalty_last_n = 0;
  std::vector<LogitEdit> repeat_edits;
  LogitEditsOf(repeat_only, history, n, &repeat_edits);
  for (size_t i = 0; i < history.size(); ++i) rows[static_cast<size_t>(n + history[i])] = i % 2 == 0 ? -0.0f : 0.0f;
  std::vector<uint64_t> mask(static_cast<size_t>((n + 63) / 64));
  uint64_t state = 99;
  for (uint64_t& w : mask) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    w = (state >> 7) & (state >> 23) & (state >> 31);  // about one token in eight
  }
  mask[0] |= 0x3;  // tokens 0, 1; 5 (biased) stays refused unless set
  const std::vector<Backend::RowControl> controls = {
      {2, c.penalty_rule(), edits, {}},    // bias and penalties
      {0, c.penalty_rule(), edits, mask},  // and the grammar
      {3, PenaltyRule{}, {}, mask},        // the grammar alone
      {1, repeat_only.penalty_rule(), repeat_edits, {}},
  };
  float* x = h_->Put(rows);
  ASSERT_TRUE(be.ControlRows(x, n, controls).ok());
  const std::vector<float> got = h_->Get(x, rows.size());

  std::vector<float> want = rows;
  absl::flat_hash_map<int32_t, int32_t> times;
  for (int32_t t : history) ++times[t];
  auto controlled = [&](std::span<float> row, const LogitControls* edited, bool masked) {
    if (edited != nullptr) {
      for (const auto& [t, b] : edited->bias) row[static_cast<size_t>(t)] += b;
      for (const auto& [t, k] : times) {
        float& l = row[static_cast<size_t>(t)];
        l = l <= 0 ? l * edited->repetition_penalty : l / edited->repetition_penalty;
        const float lower = static_cast<float>(k) * edited->frequency_penalty;  // two roundings, as the rule
        l -= lower + edited->presence_penalty;
      }
    }
    for (int64_t t = 0; masked && t < n; ++t) {
      if (((mask[static_cast<size_t>(t / 64)] >> (t % 64)) & 1) == 0) row[static_cast<size_t>(t)] = -INFINITY;
    }
  };
  auto row = [&](int64_t r) { return std::span(want).subspan(static_cast<size_t>(r * n), static_cast<size_t>(n)); };
  controlled(row(2), &c, false);
  controlled(row(0), &c, true);
  controlled(row(3), nullptr, true);
  controlled(row(1), &repeat_only, false);
  for (int64_t r = 0; r < 5; ++r) {
    int64_t differ = 0, first = -1;
    for (int64_t t = 0; t < n; ++t) {
      const size_t i = static_cast<size_t>(r * n + t);
      if (!SameBits(&got[i], &want[i], 1) && differ++ == 0) first = t;
    }
    EXPECT_EQ(differ, 0) << "row " << r << ": first at token " << first << ": " << got[static_cast<size_t>(r * n + first)]
                         << " want " << want[static_cast<size_t>(r * n + first)];
  }
  EXPECT_LT(std::count(want.begin(), want.end(), -INFINITY), 2 * n) << "the mask was meant to keep some tokens";

  // A token outside the row, or a mask of another size, is refused.
  const LogitEdit outside{static_cast<int32_t>(n), 1, 0.0f, 0};
  const Backend::RowControl bad_edit{0, {}, std::span(&outside, 1), {}};
  EXPECT_EQ(be.ControlRows(x, n, std::span(&bad_edit, 1)).code(), absl::StatusCode::kInvalidArgument);
  const Backend::RowControl bad_mask{0, {}, {}, std::span(mask).first(mask.size() - 1)};
  EXPECT_EQ(be.ControlRows(x, n, std::span(&bad_mask, 1)).code(), absl::StatusCode::kInvalidArgument);
}

// auto takes the first usable backend; cuda where it cannot run is UNSUPPORTED saying why;
// an unknown name is INVALID_ARGUMENT.
TEST(BackendRegistry, AutoCudaAndUnknownNames) {
  auto cpu = CreateBackend("cpu", BackendOptions{1});
  ASSERT_TRUE(cpu.ok());
  EXPECT_STREQ((*cpu)->name(), "cpu");
  EXPECT_EQ(CreateBackend("tpu", {}).status().code(), absl::StatusCode::kInvalidArgument);
  auto cuda = CreateBackend("cuda", {});
  auto automatic = CreateBackend("auto", BackendOptions{1});
  ASSERT_TRUE(automatic.ok());
  if (cuda.ok()) {
    EXPECT_STREQ((*automatic)->name(), "cuda");
    return;
  }
  EXPECT_STREQ((*automatic)->name(), "cpu");
  EXPECT_EQ(cuda.status().code(), absl::StatusCode::kUnimplemented);
  const std::string why(cuda.status().message());
  EXPECT_TRUE(why.find("not built") != std::string::npos || why.find("driver") != std::string::npos ||
              why.find("no CUDA device") != std::string::npos || why.find("compute capability") != std::string::npos)
      << why;
}

INSTANTIATE_TEST_SUITE_P(Backends, BackendOpsTest, ::testing::Values("cpu", "cuda"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace llm42
