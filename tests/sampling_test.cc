#include "lib/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <map>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "lib/sampling/logit_controls.h"
#include "lib/numerics/philox.h"
#include "lib/numerics/portable_math.h"

namespace llm42 {
namespace {

// Philox4x32-10 known-answer vectors from the Random123 distribution (kat_vectors).
TEST(Philox, KnownAnswers) {
  EXPECT_EQ(Philox4x32({0, 0, 0, 0}, {0, 0}),
            (std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(Philox4x32({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (std::array<uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(Philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (std::array<uint32_t, 4>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Philox, UniformIsAPureFunctionOfSeedAndPosition) {
  EXPECT_EQ(PhiloxUniform(42, 7), PhiloxUniform(42, 7));
  EXPECT_NE(PhiloxUniform(42, 7), PhiloxUniform(42, 8));
  EXPECT_NE(PhiloxUniform(42, 7), PhiloxUniform(43, 7));
  double sum = 0;
  for (uint64_t i = 0; i < 100000; ++i) {
    const double u = PhiloxUniform(1, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.01);
}

const std::vector<float> kLogits = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f, 0.5f, 2.5f, 0.0f};

std::set<int32_t> Ids(const std::vector<Candidate>& c) {
  std::set<int32_t> s;
  for (const Candidate& x : c) s.insert(x.id);
  return s;
}

// Logit bias and llama.cpp's penalties (llama_sampler_penalties_apply's rule: for a token seen c
// times in the last n, divide a positive logit by the repetition penalty or multiply a negative
// one, then subtract c * frequency + presence), worked by hand on values exact in float.
TEST(LogitControls, BiasThenLlamaCppPenaltiesOverTheLastNTokens) {
  LogitControls c;
  c.SetBias(2, 1.0f);
  c.SetBias(4, -INFINITY);
  c.SetBias(2, 1.0f);  // set again: replaced, not added twice
  c.repetition_penalty = 2.0f;
  c.penalty_last_n = 6;
  c.frequency_penalty = 0.5f;
  c.presence_penalty = 0.25f;
  ASSERT_TRUE(c.Validate().ok());
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f};
  const std::vector<int32_t> history = {4, 0, 1, 1, 3, 3, 3};  // token 4 is outside the last 6
  ApplyLogitControls(c, history, logits);
  // 0: 2 / 2 - (1 * 0.5 + 0.25); 1: -1 * 2 - (2 * 0.5 + 0.25); 2: 0.5 + 1 (not seen);
  // 3: 3 / 2 - (3 * 0.5 + 0.25); 4: banned.
  EXPECT_EQ(logits, (std::vector<float>{0.25f, -3.25f, 1.5f, -0.25f, -INFINITY}));
  // last_n 0: the whole history, token 4 included (-inf stays -inf).
  c.penalty_last_n = 0;
  c.bias.clear();
  logits = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f};
  ApplyLogitControls(c, history, logits);
  EXPECT_EQ(logits[4], -2.0f * 2.0f - 0.75f);
  // Out of range.
  for (float bad : {NAN, INFINITY}) {
    LogitControls b;
    b.SetBias(1, bad);
    EXPECT_EQ(b.Validate().code(), absl::StatusCode::kOutOfRange);
  }
  LogitControls p;
  p.repetition_penalty = 0.0f;
  EXPECT_EQ(p.Validate().code(), absl::StatusCode::kOutOfRange);
  p.repetition_penalty = 1.0f;
  p.penalty_last_n = -1;
  EXPECT_EQ(p.Validate().code(), absl::StatusCode::kOutOfRange);
  p.penalty_last_n = 64;
  p.presence_penalty = NAN;
  EXPECT_EQ(p.Validate().code(), absl::StatusCode::kOutOfRange);
}

TEST(Sampler, GreedyIsArgmaxWithLowestIdOnTies) {
  SamplingParams p;
  EXPECT_EQ(SampleToken(kLogits, p, 0), 1);  // ids 1 and 3 tie at 3.0
}

TEST(Sampler, TemperatureZeroEqualsGreedyForEverySeed) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.top_k = 5;
  p.top_p = 0.5f;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    p.seed = seed;
    EXPECT_EQ(SampleToken(kLogits, p, static_cast<int64_t>(seed)), 1);
  }
}

TEST(Sampler, TopKKeepsExactlyTheKBest) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 3;
  const auto c = SamplingCandidates(kLogits, p);
  EXPECT_EQ(Ids(c), (std::set<int32_t>{1, 3, 6}));
  EXPECT_EQ(c[0].id, 1);  // ties ordered by id
  EXPECT_EQ(c[1].id, 3);
  // And draws never leave that set.
  for (int64_t pos = 0; pos < 2000; ++pos) {
    p.seed = 9;
    EXPECT_TRUE(Ids(c).count(SampleToken(kLogits, p, pos)));
  }
}

TEST(Sampler, TopPKeepsTheSmallestPrefixReachingP) {
  SamplingParams p;
  p.temperature = 1.0f;
  const auto all = SamplingCandidates(kLogits, p);
  // Probabilities in order: ids 1, 3 (equal), 6, 2, ...
  p.top_p = static_cast<float>(all[0].prob + all[1].prob) - 1e-6f;  // two suffice
  EXPECT_EQ(Ids(SamplingCandidates(kLogits, p)), (std::set<int32_t>{1, 3}));
  p.top_p = static_cast<float>(all[0].prob + all[1].prob) + 1e-4f;  // needs a third
  EXPECT_EQ(Ids(SamplingCandidates(kLogits, p)), (std::set<int32_t>{1, 3, 6}));
}

TEST(Sampler, MinPDropsTokensBelowTheFraction) {
  SamplingParams p;
  p.temperature = 1.0f;
  // p(id 6) / p(best) = e^-0.5 = 0.607; p(id 2) / p(best) = e^-1 = 0.368.
  p.min_p = 0.5f;
  EXPECT_EQ(Ids(SamplingCandidates(kLogits, p)), (std::set<int32_t>{1, 3, 6}));
  p.min_p = 0.3f;
  EXPECT_EQ(Ids(SamplingCandidates(kLogits, p)), (std::set<int32_t>{1, 2, 3, 6}));
}

TEST(Sampler, KeptProbabilitiesAreRenormalized) {
  SamplingParams p;
  p.temperature = 0.7f;
  p.top_k = 4;
  double total = 0;
  for (const Candidate& c : SamplingCandidates(kLogits, p)) total += c.prob;
  EXPECT_NEAR(total, 1.0, 1e-12);
}

TEST(Sampler, SeededSamplingIsReproducibleAndFollowsTheDistribution) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 1234;
  std::vector<int32_t> first, second;
  std::map<int32_t, int> counts;
  const int n = 20000;
  for (int64_t pos = 0; pos < n; ++pos) first.push_back(SampleToken(kLogits, p, pos));
  for (int64_t pos = 0; pos < n; ++pos) second.push_back(SampleToken(kLogits, p, pos));
  EXPECT_EQ(first, second);
  for (int32_t id : first) ++counts[id];
  for (const Candidate& c : SamplingCandidates(kLogits, p)) {
    EXPECT_NEAR(counts[c.id] / static_cast<double>(n), c.prob, 0.015) << "token " << c.id;
  }
  p.seed = 1235;
  std::vector<int32_t> other;
  for (int64_t pos = 0; pos < n; ++pos) other.push_back(SampleToken(kLogits, p, pos));
  EXPECT_NE(first, other);
}

// The documented rule, written out plainly (a full stable sort, one weight per token, the
// unfiltered total in id order, the walk in draw order), against the sampler's partial orders
// (a histogram select for the first tokens, a radix sort past them) on vocabularies full of
// exact ties, signed zeros and infinities, at sizes where a draw stays in the select and where it
// walks into the radix sort. Fails if the keys order -0 before +0 (a tie the rule breaks by id),
// if the stable passes lose the id order of tied logits, or if a select or sort misplaces a key.
TEST(Sampler, DrawsAndOrderMatchAFullSortOfTheDocumentedRule) {
  std::mt19937 gen(42);
  for (size_t vocab : {size_t{7}, size_t{300}, size_t{5000}, size_t{40000}, size_t{130000}}) {
    for (int shape = 0; shape < 3; ++shape) {
      std::vector<float> logits(vocab);
      for (size_t i = 0; i < vocab; ++i) {
        const uint32_t r = gen();
        if (shape == 0) {  // few distinct values: ties everywhere, both zeros
          const float levels[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 2.0f};
          logits[i] = levels[r % 6];
        } else if (shape == 1) {  // flat: a draw walks far
          logits[i] = static_cast<float>(r % 1000) * 0.001f - 0.5f;
        } else {  // peaked, with masked tokens
          logits[i] = r % 17 == 0 ? -std::numeric_limits<float>::infinity() : static_cast<float>(r % 100000) * 1e-3f;
        }
      }
      std::vector<int32_t> order(vocab);
      for (size_t i = 0; i < vocab; ++i) order[i] = static_cast<int32_t>(i);
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
        return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)];
      });
      SamplingParams p;
      p.temperature = 0.8f;
      p.seed = 5;
      const double max = logits[static_cast<size_t>(order[0])];
      auto weight = [&](int32_t id) { return PortableExp((logits[static_cast<size_t>(id)] - max) / 0.8); };
      double total = 0;
      for (size_t i = 0; i < vocab; ++i) total += weight(static_cast<int32_t>(i));
      for (int64_t pos = 0; pos < 40; ++pos) {
        const double target = PhiloxUniform(p.seed, static_cast<uint64_t>(pos)) * total;
        double cum = 0;
        int32_t expected = order.back();
        for (int32_t id : order) {
          cum += weight(id);
          if (target < cum) {
            expected = id;
            break;
          }
        }
        ASSERT_EQ(SampleToken(logits, p, pos), expected) << "vocab " << vocab << " shape " << shape << " pos " << pos;
      }
      // The order itself, as far as candidates and top logprobs show it.
      p.top_k = static_cast<int32_t>(std::min<size_t>(vocab, 3000));
      const auto c = SamplingCandidates(logits, p);
      ASSERT_EQ(c.size(), static_cast<size_t>(p.top_k));
      for (size_t i = 0; i < c.size(); ++i) ASSERT_EQ(c[i].id, order[i]) << "vocab " << vocab << " rank " << i;
      std::vector<TopLogprob> top;
      AppendTopLogprobs(logits, 100, LogSoftmax(logits), &top);
      for (size_t i = 0; i < top.size(); ++i) ASSERT_EQ(top[i].token, order[i]) << "vocab " << vocab << " rank " << i;
    }
  }
}

TEST(Sampler, LogprobIsLogSoftmax) {
  const std::vector<float> l = {0.0f, std::log(3.0f)};
  EXPECT_NEAR(TokenLogprob(l, 1), std::log(0.75), 1e-6);
  EXPECT_NEAR(TokenLogprob(l, 0), std::log(0.25), 1e-6);
}

}  // namespace
}  // namespace llm42
