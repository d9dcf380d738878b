// Top-N logprobs (issue 15): the n most likely tokens per position, against a long-double
// reference; a deterministic request's come from the fixed schedule (the same bits with the
// fast path's logits perturbed, while a plain request's change — the control); the chosen token's
// entry has exactly its logprob; bad counts are refused.
//
// Proven to fail on a broken build: with DvrController::Verify not filling `top` from the
// replay's logits, DeterministicTopLogprobsComeFromTheFixedSchedule fails (checked).
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "lib/engine/session.h"
#include "lib/sampling/sampler.h"
#include "tests/model_fixture.h"
#include "tests/test_util.h"

namespace llm42 {
namespace {

TEST(TopLogprobs, MatchALongDoubleReferenceInOrder) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> logits(1000);
  for (float& l : logits) l = dist(rng);
  logits[17] = logits[400] = 20.0f;  // a tie at the top: the lower id first
  std::vector<TopLogprob> top;
  AppendTopLogprobs(logits, 20, LogSoftmax(logits), &top);
  ASSERT_EQ(top.size(), 20u);
  long double total = 0;
  for (float l : logits) total += std::exp(static_cast<long double>(l));
  EXPECT_EQ(top[0].token, 17);
  EXPECT_EQ(top[1].token, 400);
  for (size_t i = 0; i < top.size(); ++i) {
    const long double ref = logits[static_cast<size_t>(top[i].token)] - std::log(total);
    EXPECT_NEAR(top[i].logprob, static_cast<double>(ref), 1e-5) << i;
    // The same bits as the single-token logprob.
    const float single = TokenLogprob(logits, top[i].token);
    EXPECT_EQ(std::memcmp(&single, &top[i].logprob, sizeof single), 0) << i;
    if (i > 0) {
      EXPECT_GE(top[i - 1].logprob, top[i].logprob);
    }
  }
  // Every token not listed is no more likely than the last listed.
  std::vector<bool> listed(logits.size());
  for (const TopLogprob& t : top) listed[static_cast<size_t>(t.token)] = true;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!listed[i]) {
      EXPECT_LE(logits[i], logits[static_cast<size_t>(top.back().token)]);
    }
  }
  // More than the vocabulary: all of it.
  std::vector<TopLogprob> all;
  AppendTopLogprobs(std::span<const float>(logits.data(), 5), 20, LogSoftmax(std::span<const float>(logits.data(), 5)), &all);
  EXPECT_EQ(all.size(), 5u);
}

class TopLogprobsEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::SmallVocabTinyModelPath();
    if (model_.empty()) GTEST_SKIP() << "../shared/models/stories260K.gguf is missing";
  }
  std::unique_ptr<Session> Open(double noise) {
    SessionOptions o;
    o.model_path = model_;
    o.threads = 2;
    o.context_length = 256;
    o.determinism.fast_path_noise = noise;
    auto s = Session::Create(o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(s).value() : nullptr;
  }
  static RequestOptions Spec(bool deterministic) {
    RequestOptions r;
    r.prompt_tokens = {1, 40, 41, 42, 300, 7};
    r.has_prompt_tokens = true;
    r.max_tokens = 16;
    r.ignore_eos = true;
    r.deterministic = deterministic;
    r.logprobs = true;
    r.top_logprobs = 5;
    r.sampling.temperature = 0.8f;
    r.sampling.seed = 9;
    r.has_seed = true;
    return r;
  }
  std::vector<TopLogprob> Run(Session& s, const RequestOptions& spec, std::vector<float>* logprobs = nullptr,
                              std::vector<int32_t>* tokens = nullptr) {
    auto r = s.Submit(spec, nullptr);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return {};
    (*r)->Wait(-1);
    if (logprobs != nullptr) *logprobs = (*r)->logprobs();
    if (tokens != nullptr) *tokens = (*r)->output_tokens();
    return (*r)->top_logprobs();
  }
  static bool SameBits(const std::vector<TopLogprob>& a, const std::vector<TopLogprob>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(TopLogprob)) == 0;
  }
  std::string model_;
};

TEST_F(TopLogprobsEngineTest, DeterministicTopLogprobsComeFromTheFixedSchedule) {
  auto quiet = Open(0.0), noisy = Open(0.05);
  std::vector<float> logprobs;
  std::vector<int32_t> tokens;
  const std::vector<TopLogprob> ref = Run(*quiet, Spec(true), &logprobs, &tokens);
  ASSERT_EQ(ref.size(), 16u * 5);
  EXPECT_TRUE(SameBits(Run(*noisy, Spec(true)), ref)) << "a deterministic request's top-N moved with fast-path noise";
  // The chosen token's entry, where it is among the five, is its logprob exactly.
  for (size_t i = 0; i < tokens.size(); ++i) {
    for (size_t j = 0; j < 5; ++j) {
      const TopLogprob& t = ref[i * 5 + j];
      if (t.token == tokens[i]) {
        EXPECT_EQ(std::memcmp(&t.logprob, &logprobs[i], sizeof(float)), 0) << i;
      }
    }
  }
  // The control: a plain request's top-N come from the (noisy) fast path.
  EXPECT_FALSE(SameBits(Run(*noisy, Spec(false)), Run(*quiet, Spec(false))));
}

TEST_F(TopLogprobsEngineTest, CountsOutsideZeroToTwentyAreRefused) {
  auto s = Open(0.0);
  RequestOptions bad = Spec(false);
  bad.top_logprobs = 21;
  EXPECT_EQ(s->Submit(bad, nullptr).status().code(), absl::StatusCode::kOutOfRange);
  bad.top_logprobs = -1;
  EXPECT_EQ(s->Submit(bad, nullptr).status().code(), absl::StatusCode::kOutOfRange);
  RequestOptions none = Spec(false);
  none.top_logprobs = 0;
  EXPECT_TRUE(Run(*s, none).empty());
}

}  // namespace
}  // namespace llm42
