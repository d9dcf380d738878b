#include "lib/sampling/sampler.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <random>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "lib/numerics/draw_rule.h"
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

// The documented rule (draw_rule.h), written out plainly (a full stable sort, one fixed-point
// weight per token, the total in id order, the walk in draw order), against the sampler's
// partial orders (a histogram select for the first tokens, a radix sort past them) on
// vocabularies full of exact ties, signed zeros and infinities, at sizes where a draw stays in
// the select and where it walks into the radix sort. Fails if the keys order -0 before +0 (a tie
// the rule breaks by id), if the stable passes lose the id order of tied logits, or if a select
// or sort misplaces a key.
std::vector<float> RuleRow(std::mt19937& gen, size_t vocab, int shape) {
  std::vector<float> logits(vocab);
  for (size_t i = 0; i < vocab; ++i) {
    const uint32_t r = gen();
    if (shape == 0) {  // few distinct values: ties everywhere, both zeros
      const float levels[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 2.0f};
      logits[i] = levels[r % 6];
    } else if (shape == 1) {  // flat: a draw walks far
      logits[i] = static_cast<float>(r % 1000) * 0.001f - 0.5f;
    } else if (shape == 2) {  // peaked, with masked tokens
      logits[i] = r % 17 == 0 ? -std::numeric_limits<float>::infinity() : static_cast<float>(r % 100000) * 1e-3f;
    } else {  // a model's: roughly normal, a few far ahead
      logits[i] = static_cast<float>(std::normal_distribution<double>(0.0, 2.0)(gen)) + (r % 997 == 0 ? 12.0f : 0.0f);
    }
  }
  return logits;
}

TEST(Sampler, DrawsAndOrderMatchAFullSortOfTheDocumentedRule) {
  std::mt19937 gen(42);
  for (size_t vocab : {size_t{7}, size_t{300}, size_t{5000}, size_t{40000}, size_t{130000}}) {
    for (int shape = 0; shape < 3; ++shape) {
      const std::vector<float> logits = RuleRow(gen, vocab, shape);
      std::vector<int32_t> order(vocab);
      for (size_t i = 0; i < vocab; ++i) order[i] = static_cast<int32_t>(i);
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
        return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)];
      });
      SamplingParams p;
      p.temperature = 0.8f;
      p.seed = 5;
      const double max = logits[static_cast<size_t>(order[0])];
      auto weight = [&](int32_t id) {
        return static_cast<uint64_t>(std::ldexp(PortableExp((logits[static_cast<size_t>(id)] - max) / 0.8), 40));
      };
      uint64_t total = 0;
      for (size_t i = 0; i < vocab; ++i) total += weight(static_cast<int32_t>(i));
      for (int64_t pos = 0; pos < 40; ++pos) {
        const auto u = static_cast<unsigned __int128>(std::ldexp(PhiloxUniform(p.seed, static_cast<uint64_t>(pos)), 53));
        const auto target = static_cast<uint64_t>(u * total >> 53);
        uint64_t cum = 0;
        int32_t expected = -1;
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

// The rule's thresholds against their definitions, in integers wide enough to be exact.
TEST(DrawRule, ThresholdsAreExact) {
  std::mt19937_64 gen(7);
  for (int i = 0; i < 20000; ++i) {
    const float top_p = std::uniform_real_distribution<float>(1e-6f, 1.0f)(gen);
    const uint64_t total = gen() >> (1 + gen() % 60);
    const uint64_t need = TopPNeed(top_p, total);
    // top_p = m / 2^s; need = ceil(m * total / 2^s): need * 2^s >= m total > (need - 1) * 2^s.
    int e = 0;
    const double m = std::frexp(static_cast<double>(top_p), &e);  // top_p = m 2^e, m in [0.5, 1)
    const auto mant = static_cast<unsigned __int128>(std::ldexp(m, 24));
    const int s = 24 - e;
    ASSERT_LT(s, 120);
    const unsigned __int128 exact = mant * total;
    ASSERT_GE(static_cast<unsigned __int128>(need) << s, exact) << top_p << " " << total;
    if (need > 0) {
      ASSERT_LT(static_cast<unsigned __int128>(need - 1) << s, exact) << top_p << " " << total;
    }
  }
  EXPECT_EQ(TopPNeed(0.5f, 10), 5u);  // exactly half: reached by the half, not one more
  EXPECT_EQ(TopPNeed(0.5f, 11), 6u);
  EXPECT_EQ(TopPNeed(0.1f, uint64_t{1} << 40), uint64_t{13421773} << 13);  // 0.1f = 13421773 * 2^-27
  EXPECT_EQ(TopPNeed(0.1f, 3), 1u);  // 0.30000000447...
  EXPECT_EQ(MinPNeed(1.0f), uint64_t{1} << 40);
  EXPECT_EQ(MinPNeed(0.5f), uint64_t{1} << 39);
  EXPECT_EQ(MinPNeed(0.1f), uint64_t{13421773} << 13);
  EXPECT_EQ(MinPNeed(1e-20f), 1u);  // 1e-20 * 2^40 = 1.1e-8: rounded up
  EXPECT_EQ(FixedWeight(1.0), uint64_t{1} << 40);
  EXPECT_EQ(FixedWeight(std::ldexp(1.0, -41)), 0u);
  EXPECT_EQ(FixedWeight(std::nan("")), 0u);
  for (uint64_t total : {uint64_t{1}, uint64_t{3}, uint64_t{1} << 40, (uint64_t{1} << 62) + 12345}) {
    EXPECT_EQ(DrawTarget(0, total), 0u);
    EXPECT_EQ(DrawTarget(uint64_t{1} << 52, total), total / 2);
    EXPECT_LT(DrawTarget((uint64_t{1} << 53) - 1, total), total);  // u < 1: below the total
  }
  EXPECT_EQ(DrawTarget((uint64_t{1} << 53) - 1, uint64_t{1} << 40), (uint64_t{1} << 40) - 1);
  // (2^53 - 1) (2^62 + 12345) / 2^53 = 2^62 + 12345 - 512.0000014
  EXPECT_EQ(DrawTarget((uint64_t{1} << 53) - 1, (uint64_t{1} << 62) + 12345), (uint64_t{1} << 62) + 12345 - 513);
}

// A barrier of a mutex and a condition variable. Not std::barrier: with MinGW's GCC 12 it is
// libstdc++'s atomic wait without futexes (known to lose wake-ups there), and under Wine the
// three-thread selection test once hung with every thread asleep.
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void ArriveAndWait() {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t generation = generation_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != generation; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  const int n_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
};

// A Group of real threads for DrawBySelect: a barrier, and atomics on the shared words, as a
// CUDA block has __syncthreads and shared-memory atomics.
class ThreadGroup {
 public:
  struct State {
    explicit State(int n) : barrier(n) {}
    Barrier barrier;
    uint64_t bins[256] = {};
    uint64_t words[4] = {};
  };
  ThreadGroup(State& shared, int rank, int size) : shared_(shared), rank_(rank), size_(size) {}
  int rank() const { return rank_; }
  int size() const { return size_; }
  void Sync() { shared_.barrier.ArriveAndWait(); }
  uint64_t* Bins() { return shared_.bins; }
  uint64_t* Shared() { return shared_.words; }
  void Add(uint64_t* p, uint64_t v) { std::atomic_ref<uint64_t>(*p).fetch_add(v); }
  void Min(uint64_t* p, uint64_t v) {
    std::atomic_ref<uint64_t> a(*p);
    uint64_t old = a.load();
    while (v < old && !a.compare_exchange_weak(old, v)) {
    }
  }
  void Max(uint64_t* p, uint64_t v) {
    std::atomic_ref<uint64_t> a(*p);
    uint64_t old = a.load();
    while (v > old && !a.compare_exchange_weak(old, v)) {
    }
  }

 private:
  State& shared_;
  int rank_, size_;
};

template <typename Fn>
auto OnThreads(int n, Fn fn) {
  ThreadGroup::State shared(n);
  std::vector<decltype(fn(std::declval<ThreadGroup&>()))> results(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      ThreadGroup g(shared, r, n);
      results[static_cast<size_t>(r)] = fn(g);
    });
  }
  for (std::thread& t : threads) t.join();
  for (const auto& x : results) EXPECT_EQ(x.token, results[0].token);  // every thread ends with the draw
  return results[0];
}

// Selection (what a device runs, one thread or many) against the host's lazily sorted walk: the
// same token and margin for every filter combination, on rows of ties, masked tokens and model-like
// logits. Fails if a select pass misses a key, if a sum is left to the order of additions, or if
// a threshold is compared another way than the host compares it.
TEST(DrawRule, SelectionDrawsTheHostSamplersTokens) {
  std::mt19937 gen(11);
  struct Knobs {
    float temperature;
    int32_t top_k;
    float top_p, min_p;
  };
  const Knobs knobs[] = {{0.8f, 0, 1.0f, 0.0f},  {1.0f, 40, 1.0f, 0.0f},   {0.7f, 0, 0.9f, 0.0f},
                         {1.3f, 0, 1.0f, 0.05f}, {0.8f, 50, 0.95f, 0.02f}, {2.0f, 3, 0.5f, 0.3f}};
  int checked = 0;
  for (size_t vocab : {size_t{2}, size_t{7}, size_t{300}, size_t{5000}}) {
    for (int shape = 0; shape < 4; ++shape) {
      const std::vector<float> logits = RuleRow(gen, vocab, shape);
      for (const Knobs& k : knobs) {
        SamplingParams p;
        p.temperature = k.temperature;
        p.top_k = k.top_k;
        p.top_p = k.top_p;
        p.min_p = k.min_p;
        p.seed = gen();
        for (uint64_t pos = 0; pos < 6; ++pos) {
          const SampledToken host = SampleWithMargin(logits, p, static_cast<int64_t>(pos));
          SerialGroup serial;
          const SampledToken one = DrawBySelect(serial, logits.data(), static_cast<int64_t>(vocab), p, pos);
          ASSERT_EQ(one.token, host.token) << "vocab " << vocab << " shape " << shape << " top_k " << k.top_k;
          ASSERT_EQ(one.margin, host.margin) << "vocab " << vocab << " shape " << shape << " top_k " << k.top_k;
          // Threads that share the histograms (each barrier waits for all of them: on a busy
          // machine that costs milliseconds, so only one draw a row).
          if (pos == 0 && vocab >= 300 && &k == &knobs[(static_cast<size_t>(shape) + vocab) % 6]) {
            const SampledToken many = OnThreads(3, [&](ThreadGroup& g) {
              return DrawBySelect(g, logits.data(), static_cast<int64_t>(vocab), p, pos);
            });
            ASSERT_EQ(many.token, host.token);
            ASSERT_EQ(many.margin, host.margin);
          }
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 4 * 4 * 6 * 6);
  // A vocabulary of a real model's size, once.
  const std::vector<float> big = RuleRow(gen, 128256, 3);
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_p = 0.95f;
  p.seed = 3;
  const SampledToken many = OnThreads(3, [&](ThreadGroup& g) { return DrawBySelect(g, big.data(), 128256, p, 9); });
  EXPECT_EQ(many.token, SampleWithMargin(big, p, 9).token);
}

// Logprobs by selection (a device's) equal the host's LogSoftmax to the bit.
TEST(DrawRule, SelectionLogprobsEqualTheHosts) {
  std::mt19937 gen(5);
  for (size_t vocab : {size_t{1}, size_t{7}, size_t{5000}, size_t{128256}}) {
    for (int shape = 0; shape < 4; ++shape) {
      const std::vector<float> logits = RuleRow(gen, vocab, shape);
      SerialGroup serial;
      const LogSoftmaxParts parts = LogSoftmaxBySelect(serial, logits.data(), static_cast<int64_t>(vocab));
      const LogSoftmax host(logits);
      for (size_t i = 0; i < vocab; i += 1 + vocab / 50) {
        ASSERT_EQ(std::bit_cast<uint32_t>(Logprob(logits[i], parts.max, parts.log_total)),
                  std::bit_cast<uint32_t>(host(logits[i])))
            << "vocab " << vocab << " shape " << shape << " id " << i;
      }
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
