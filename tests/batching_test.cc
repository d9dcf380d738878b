// Continuous batching, the paged KV cache and preemption, under load from many threads.
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "lib/engine/session.h"
#include "tests/model_fixture.h"

namespace llm42 {
namespace {

std::unique_ptr<Session> Open(const std::string& model, DeterminismMode mode, int64_t kv_tokens,
                              int32_t max_running = 16, int32_t max_batch_tokens = 256,
                              double noise = 0, int32_t window = 64) {
  SessionOptions o;
  o.determinism.fast_path_noise = noise;
  o.determinism.window = window;
  o.model_path = model;
  o.threads = 2;
  o.kv_cache_tokens = kv_tokens;
  o.max_running_requests = max_running;
  o.max_batch_tokens = max_batch_tokens;
  o.context_length = 512;
  o.determinism.mode = mode;
  o.determinism.decode_path = DecodePath::kVerify;  // rollbacks under load are the point
  auto s = Session::Create(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(s).value() : nullptr;
}

RequestOptions Greedy(std::vector<int32_t> prompt, int32_t max_tokens) {
  RequestOptions r;
  r.prompt_tokens = std::move(prompt);
  r.has_prompt_tokens = true;
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  return r;
}

std::vector<int32_t> Prompt(int length, int salt) {
  std::vector<int32_t> p = {1};
  for (int i = 1; i < length; ++i) p.push_back(3 + (i * 7919 + salt * 104729) % 500);
  return p;
}

// The steps' time split (EngineStats::StepTimes, in the stats JSON and `llm42 bench`): every step
// is counted once, the three parts are never negative, the forward passes take time, and together
// they fit in the wall time the requests took (a part counted twice, or a step's start taken
// from an earlier step, would not).
TEST(Batching, StepTimesSplitEachStepOnce) {
  LLM42_SMALL_VOCAB_TINY_MODEL_OR_SKIP(model);
  auto s = Open(model, DeterminismMode::kSelective, 0);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<Request>> reqs;
  for (int i = 0; i < 4; ++i) reqs.push_back(*s->Submit(Greedy(Prompt(20 + i, i), 12), nullptr));
  for (auto& r : reqs) ASSERT_TRUE(r->Wait(60000));
  // The last step finishes the requests before it records its times: wait for that.
  EngineStats::StepTimes t = s->step_times();
  for (int i = 0; i < 6000 && t.steps != s->stat(Stat::kDecodeSteps); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    t = s->step_times();
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(t.steps, s->stat(Stat::kDecodeSteps));
  EXPECT_GT(t.forward_s, 0);
  EXPECT_GE(t.logits_s, 0);
  EXPECT_GT(t.host_s, 0);
  EXPECT_LE(t.forward_s + t.logits_s + t.host_s, wall);
  const std::string json = s->StatsJson();
  EXPECT_NE(json.find("\"step_forward_us\":" + std::to_string(static_cast<int64_t>(t.forward_s * 1e6))),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"step_host_us\":"), std::string::npos) << json;
}

// Greedy draws without logprobs read only their row's ArgmaxSummary (computed where the logits
// are; on a GPU the row never crosses), and the rows that need logits come back packed: in steps
// that mix both, every request's tokens — and the logprob bits of those that ask — equal its
// run alone with logprobs (every row's logits, the plain draw). batch_invariant mode makes the
// plain requests' bits batch-independent, so any difference is the summary path's; selective
// mode sends deterministic requests' candidates through it and verifies them from full rows.
// Fails on a broken build: with FetchLogits copying the first rows instead of gathering the
// ones asked for (checked), or summaries put at the wrong logit row.
TEST(Batching, SummarizedAndFullRowsShareSteps) {
  LLM42_SMALL_VOCAB_TINY_MODEL_OR_SKIP(model);
  for (DeterminismMode mode : {DeterminismMode::kBatchInvariant, DeterminismMode::kSelective}) {
    auto spec = [&](int i, bool logprobs) {
      RequestOptions r = Greedy(Prompt(12 + 3 * i, i), 14);
      r.logprobs = logprobs;
      r.deterministic = mode == DeterminismMode::kSelective;
      return r;
    };
    auto busy = Open(model, mode, 0);
    std::vector<std::shared_ptr<Request>> reqs;
    for (int i = 0; i < 6; ++i) reqs.push_back(*busy->Submit(spec(i, i % 2 == 0), nullptr));
    for (auto& r : reqs) ASSERT_TRUE(r->Wait(60000));
    for (int i = 0; i < 6; ++i) {
      auto alone = Open(model, mode, 0);
      auto ref = *alone->Submit(spec(i, true), nullptr);
      ASSERT_TRUE(ref->Wait(60000));
      EXPECT_EQ(reqs[static_cast<size_t>(i)]->output_tokens(), ref->output_tokens()) << "request " << i;
      if (i % 2 == 0) {
        const std::vector<float> got = reqs[static_cast<size_t>(i)]->logprobs(), want = ref->logprobs();
        ASSERT_EQ(got.size(), want.size());
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << "request " << i;
      }
    }
    EXPECT_EQ(busy->invariant_violations(), 0);
  }
}

TEST(Batching, RequestsShareForwardPasses) {
  LLM42_SMALL_VOCAB_TINY_MODEL_OR_SKIP(model);
  auto s = Open(model, DeterminismMode::kSelective, 0);
  std::vector<std::shared_ptr<Request>> reqs;
  for (int i = 0; i < 8; ++i) reqs.push_back(*s->Submit(Greedy(Prompt(20 + i, i), 16), nullptr));
  for (auto& r : reqs) ASSERT_TRUE(r->Wait(60000));
  // 8 requests x 16 tokens: far fewer engine steps than tokens when they decode together.
  EXPECT_EQ(s->stat(Stat::kTokensGenerated), 8 * 16);
  EXPECT_LT(s->stat(Stat::kDecodeSteps), 8 * 16 / 2);
  EXPECT_EQ(s->kv_blocks_in_use(), 0);
}

TEST(Batching, RequestThatCanNeverFitIsRefused) {
  LLM42_SMALL_VOCAB_TINY_MODEL_OR_SKIP(model);
  auto s = Open(model, DeterminismMode::kSelective, /*kv_tokens=*/64);
  auto r = s->Submit(Greedy(Prompt(100, 0), 4), nullptr);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  // A request that fits but would outgrow the whole cache stops at its capacity.
  auto fits = s->Submit(Greedy(Prompt(40, 0), 100), nullptr);
  ASSERT_TRUE(fits.ok());
  ASSERT_TRUE((*fits)->Wait(60000));
  EXPECT_EQ((*fits)->finish_reason(), FinishReason::kLength);
  EXPECT_EQ((*fits)->output_tokens().size(), 64u - 40u);
}

// DESIGN "done means" of the serving engine: 48 concurrent requests (16 under ThreadSanitizer)
// of mixed lengths from 8 threads, random cancels, a KV cache small enough to force preemption. Every request ends with
// the right status and finish reason, the cache is empty afterwards, and every greedy request
// that completed produced exactly what it produces alone (the fixed schedule).
//
// In selective mode with every request deterministic (noisy fast path, windows of 8) the same
// must hold: verification, rollback and preemption interleave under memory pressure.
void ConcurrentLoad(const std::string& model, bool selective) {
  struct Spec {
    std::vector<int32_t> prompt;
    int32_t max_tokens;
  };
  std::vector<Spec> specs;
  std::mt19937 rng(42);
  const int requests = testing::kThreadSanitizer ? 16 : 48;
  for (int i = 0; i < requests; ++i) {
    specs.push_back({Prompt(8 + static_cast<int>(rng() % 60), i), 4 + static_cast<int32_t>(rng() % 32)});
  }
  // References: each request alone.
  std::vector<std::vector<int32_t>> solo(specs.size());
  {
    auto alone = Open(model, DeterminismMode::kBatchInvariant, 0, 1);
    for (size_t i = 0; i < specs.size(); ++i) {
      auto r = alone->Submit(Greedy(specs[i].prompt, specs[i].max_tokens), nullptr);
      ASSERT_TRUE(r.ok());
      ASSERT_TRUE((*r)->Wait(60000));
      solo[i] = (*r)->output_tokens();
    }
  }

  // About a quarter of all the requests' tokens fit at once: preemption is forced at either load.
  const int64_t kv_tokens = testing::kThreadSanitizer ? 224 : 640;
  auto s = selective ? Open(model, DeterminismMode::kSelective, kv_tokens, 16, 128, 0.05, 8)
                     : Open(model, DeterminismMode::kBatchInvariant, kv_tokens, 16, 128);
  std::atomic<int> mismatches{0}, bad_status{0}, completed{0}, cancelled{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 local(static_cast<uint32_t>(t));
      std::vector<std::pair<size_t, std::shared_ptr<Request>>> mine;
      for (size_t i = static_cast<size_t>(t); i < specs.size(); i += 8) {
        RequestOptions spec = Greedy(specs[i].prompt, specs[i].max_tokens);
        spec.deterministic = selective;
        auto r = s->Submit(spec, nullptr);
        if (!r.ok()) {
          ++bad_status;
          continue;
        }
        mine.push_back({i, *r});
        std::this_thread::sleep_for(std::chrono::microseconds(local() % 2000));
      }
      for (auto& [i, r] : mine) {
        if (local() % 4 == 0) r->Cancel();
      }
      for (auto& [i, r] : mine) {
        if (!r->Wait(120000)) {
          ++bad_status;
          continue;
        }
        if (r->finish_reason() == FinishReason::kCancelled) {
          ++cancelled;
          if (r->status().code() != absl::StatusCode::kCancelled) ++bad_status;
          // What was committed before the cancel is a prefix of the solo output.
          const auto out = r->output_tokens();
          if (!std::equal(out.begin(), out.end(), solo[i].begin())) ++mismatches;
        } else {
          ++completed;
          if (r->finish_reason() != FinishReason::kLength || !r->status().ok()) ++bad_status;
          if (r->output_tokens() != solo[i]) ++mismatches;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad_status.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(completed.load() + cancelled.load(), static_cast<int>(specs.size()));
  EXPECT_GT(completed.load(), 0);
  EXPECT_GT(s->stat(Stat::kPreemptions), 0) << "the cache was meant to force preemption";
  // The engine frees a request's blocks before publishing that it finished.
  EXPECT_EQ(s->kv_blocks_in_use(), 0);
  EXPECT_EQ(s->invariant_violations(), 0);
  if (selective) {
    EXPECT_GT(s->stat(Stat::kRollbacks), 0);
  }
}

TEST(Batching, ConcurrentLoadWithCancelsAndPreemption) {
  LLM42_SMALL_VOCAB_TINY_MODEL_OR_SKIP(model);
  ConcurrentLoad(model, /*selective=*/false);
}

TEST(Batching, DeterministicLoadWithCancelsAndPreemption) {
  LLM42_SMALL_VOCAB_TINY_MODEL_OR_SKIP(model);
  ConcurrentLoad(model, /*selective=*/true);
}

}  // namespace
}  // namespace llm42
