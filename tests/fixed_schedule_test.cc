// The fixed schedule end to end through the model: a position's logits are the same bits
// however it is computed (prefill, decode, chunked, batched with others, threads, SIMD), and
// the fast schedule is not secretly fixed.
#include <cstring>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/kv/kv_cache.h"
#include "lib/model/model_weights.h"
#include "tests/model_fixture.h"
#include "tests/padded_steps_backend.h"

namespace llm42 {
namespace {

// The tiny model in f32 and in q4_0 (the quantized kernels of both families).
class FixedScheduleTest : public ::testing::TestWithParam<GgmlType> {
 protected:
  void SetUp() override {
    path_ = testing::TinyModelPath(GetParam());
    if (path_.empty()) GTEST_SKIP() << "the Llama 2 vocabulary under ../shared/vocab is missing";
    auto file = GgufFile::Open(path_);
    ASSERT_TRUE(file.ok()) << file.status();
    auto model = ModelWeights::Load(std::shared_ptr<const GgufFile>(std::move(file).value()));
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(model).value();
    for (int i = 0; i < 270; ++i) prompt_.push_back(3 + (i * 7919) % 31000);
    other_.assign(prompt_.rbegin(), prompt_.rend());
  }

  // Logits of every position of `prompt_`, fed in chunks of `chunk` tokens; when `interleave`,
  // each chunk shares its forward pass with a chunk of another sequence; when `padded`, each
  // pass is padded to a bucket of rows as a device recording its steps pads it.
  std::vector<float> AllLogits(int threads, bool simd, int chunk, bool interleave, Schedule s, bool padded = false) {
    const ModelConfig& c = model_->config();
    CpuBackend cpu(threads, simd);
    testing::PaddedStepsBackend padding(cpu);
    Backend& be = padded ? static_cast<Backend&>(padding) : cpu;
    KvCache cache(64);
    auto runner = testing::MakeRunner(*model_, be, cache);
    const int32_t a = cache.Create(), b = cache.Create();
    const auto n = static_cast<int32_t>(prompt_.size());
    EXPECT_TRUE(cache.Reserve(a, n) && cache.Reserve(b, n));
    std::vector<float> out(static_cast<size_t>(n * c.n_vocab));
    for (int32_t begin = 0; begin < n; begin += chunk) {
      const int32_t end = std::min(n, begin + chunk);
      std::vector<int32_t> tokens, positions, seqs, rows;
      if (interleave) {  // the other sequence's tokens first, so ours sit at other row indices
        for (int32_t p = begin; p < end; ++p) {
          tokens.push_back(other_[static_cast<size_t>(p)]);
          positions.push_back(p);
          seqs.push_back(b);
        }
      }
      for (int32_t p = begin; p < end; ++p) {
        rows.push_back(static_cast<int32_t>(tokens.size()));
        tokens.push_back(prompt_[static_cast<size_t>(p)]);
        positions.push_back(p);
        seqs.push_back(a);
      }
      EXPECT_TRUE(runner->Forward(cache, ForwardBatch{tokens, positions, seqs, rows, s},
                                  out.data() + static_cast<size_t>(begin) * static_cast<size_t>(c.n_vocab))
                      .ok());
      if (padded) {
        EXPECT_EQ(padding.last_rows(), StepRowBucket(static_cast<int64_t>(tokens.size()), 512));
      }
    }
    if (padded) {
      EXPECT_EQ(padding.steps_run(), (n + chunk - 1) / chunk) << "each pass's layers through RunStep once";
    }
    return out;
  }

  std::string path_;
  std::unique_ptr<ModelWeights> model_;
  std::vector<int32_t> prompt_, other_;
};

struct Variant {
  const char* name;
  int threads;
  bool simd;
  int chunk;
  bool interleave;
};

TEST_P(FixedScheduleTest, LogitsAreTheSameBitsHoweverComputed) {
  const std::vector<float> ref = AllLogits(2, true, 270, false, Schedule::kFixed);  // one prefill
  // Padded: rows of a padding block at position 0 beside ours, as a device recording its steps
  // runs them (5 rows as 8, 6 as 8): they must not change a bit of ours, nor of what our
  // sequences keep. Fails when the padding rows write to one of our sequences' blocks
  // (checked: their table pointed at the first row's).
  const std::vector<float> padded = AllLogits(2, true, 5, false, Schedule::kFixed, true);
  EXPECT_EQ(std::memcmp(padded.data(), ref.data(), ref.size() * sizeof(float)), 0) << "padded chunks of 5";
  const std::vector<float> padded_beside = AllLogits(1, true, 3, true, Schedule::kFixed, true);
  EXPECT_EQ(std::memcmp(padded_beside.data(), ref.data(), ref.size() * sizeof(float)), 0)
      << "padded chunks of 3 beside another sequence";
  for (const Variant& v : {Variant{"decode token by token", 2, true, 1, false},
                           Variant{"chunks of 7", 1, true, 7, false},
                           Variant{"chunks of 64 beside another sequence", 2, true, 64, true}}) {
    const std::vector<float> got = AllLogits(v.threads, v.simd, v.chunk, v.interleave, Schedule::kFixed);
    EXPECT_EQ(std::memcmp(got.data(), ref.data(), ref.size() * sizeof(float)), 0) << v.name;
  }
}

// The portable kernels (a CPU without AVX2), in chunks beside another sequence, give the SIMD
// prefill's bits; a test of its own because under the sanitizers it takes as long as the
// variants above together.
TEST_P(FixedScheduleTest, PortableKernelsGiveTheSameLogits) {
  const std::vector<float> ref = AllLogits(2, true, 270, false, Schedule::kFixed);
  const std::vector<float> got = AllLogits(2, false, 33, true, Schedule::kFixed);
  EXPECT_EQ(std::memcmp(got.data(), ref.data(), ref.size() * sizeof(float)), 0);
}

// Sensitivity control: the same comparisons under the fast schedule find differences.
TEST_P(FixedScheduleTest, FastLogitsDependOnHowTheyAreComputed) {
  const std::vector<float> prefill = AllLogits(2, true, 270, false, Schedule::kFast);
  const std::vector<float> decode = AllLogits(2, true, 1, false, Schedule::kFast);
  EXPECT_NE(std::memcmp(prefill.data(), decode.data(), prefill.size() * sizeof(float)), 0);
  // And fast is close to fixed (it computes the same function). Against quantized weights fast
  // rounds activations to 8 bits per block (int8_dot.h, as llama.cpp does), which moves this
  // model's logits by a few hundredths; f32 only by rounding order.
  const std::vector<float> fixed = AllLogits(2, true, 270, false, Schedule::kFixed);
  double worst = 0;
  for (size_t i = 0; i < fixed.size(); ++i) worst = std::max(worst, std::fabs(double{fixed[i]} - prefill[i]));
  EXPECT_LT(worst, GetParam() == GgmlType::kF32 ? 1e-3 : 5e-2);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, FixedScheduleTest, ::testing::Values(GgmlType::kF32, GgmlType::kQ4_0),
                         [](const ::testing::TestParamInfo<GgmlType>& info) {
                           return std::string(GetGgmlTypeInfo(static_cast<uint32_t>(info.param))->name);
                         });

}  // namespace
}  // namespace llm42
