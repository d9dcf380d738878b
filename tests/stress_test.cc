// Load and faults through the C ABI on stories260K: 16 threads submit 2,000 requests (640 under
// ThreadSanitizer, testing::kThreadSanitizer) of random lengths, determinism flags and sampling parameters, with random cancels, destroys of unread
// requests, zero and 1 ms read timeouts, refused option values, and a KV pool small enough to
// preempt constantly; then the session is destroyed with requests in flight. Every request ends
// with a status and finish reason that agree; every deterministic one that finished equals its
// reference run (tokens and logprob bits); the sanitizers see no leak or race on memory; a
// watchdog fails the test with every thread's stack rather than hanging (its own test below).
// Checked to fail: with the engine's fast_path_noise applied to fixed-schedule decode rows too
// (engine.cc, `if (noise > 0)`), deterministic outputs differ from their references.
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "llm42/llm42.h"
#include "llm42/llm42_testing.h"
#include "tests/test_util.h"
#include "tests/watchdog.h"

// Under AddressSanitizer an allocation that cannot succeed aborts unless the allocator may
// return null, as the real one does (AllocationsThatCannotSucceedAreStatuses tests what llm42
// does then). ASAN_OPTIONS from the environment still override the other settings.
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }

namespace {

using Output = ::llm42::testing::TokensAndLogprobs;

// A deterministic request the storm repeats: (prompt, temperature, seed, max tokens).
struct Spec {
  const char* prompt;
  float temperature;
  uint64_t seed;
  int32_t max_tokens;
};
constexpr Spec kSpecs[] = {{"Once upon a time", 0.0f, 1, 12}, {"The cat", 0.8f, 2, 10},
                           {"Lily wanted", 1.0f, 3, 12},      {"One day", 0.8f, 4, 6},
                           {"Tom and Sue", 0.0f, 5, 9},       {"The sun", 1.0f, 6, 12}};
constexpr int kSpecCount = sizeof kSpecs / sizeof kSpecs[0];

llm42_request_options* Options(const Spec& s) {
  llm42_request_options* ro = nullptr;
  EXPECT_EQ(llm42_request_options_create(&ro), LLM42_OK);
  llm42_request_options_set_prompt(ro, s.prompt, std::strlen(s.prompt));
  llm42_request_options_set_temperature(ro, s.temperature);
  llm42_request_options_set_seed(ro, s.seed);
  llm42_request_options_set_max_tokens(ro, s.max_tokens);
  llm42_request_options_set_deterministic(ro, 1);
  llm42_request_options_set_logprobs(ro, 1);
  return ro;
}

Output Read(llm42_request* r) {
  Output o;
  size_t n = 0;
  llm42_request_output_tokens(r, nullptr, 0, &n);
  o.tokens.resize(n);
  if (n > 0) {
    EXPECT_EQ(llm42_request_output_tokens(r, o.tokens.data(), n, &n), LLM42_OK);
  }
  llm42_request_logprobs(r, nullptr, 0, &n);
  o.logprobs.resize(n);
  if (n > 0) {
    EXPECT_EQ(llm42_request_logprobs(r, o.logprobs.data(), n, &n), LLM42_OK);
  }
  return o;
}

// The session of the storm: selective, small windows, noise on the fast path (real rollbacks),
// a KV pool of 192 tokens for up to 16 running requests (constant preemption).
llm42_session* Open(const std::string& model) {
  llm42_session_options* so = nullptr;
  llm42_determinism* d = nullptr;
  llm42_session* s = nullptr;
  EXPECT_EQ(llm42_session_options_create(&so), LLM42_OK);
  EXPECT_EQ(llm42_determinism_create(LLM42_MODE_SELECTIVE, &d), LLM42_OK);
  EXPECT_EQ(llm42_determinism_set_window(d, 4), LLM42_OK);
  EXPECT_EQ(llm42_determinism_set_fast_path_noise(d, 0.5), LLM42_OK);
  EXPECT_EQ(llm42_session_options_set_model_path(so, model.c_str()), LLM42_OK);
  EXPECT_EQ(llm42_session_options_set_determinism(so, d), LLM42_OK);
  EXPECT_EQ(llm42_session_options_set_threads(so, 2), LLM42_OK);
  EXPECT_EQ(llm42_session_options_set_kv_cache_tokens(so, 192), LLM42_OK);
  EXPECT_EQ(llm42_session_options_set_max_running_requests(so, 16), LLM42_OK);
  EXPECT_EQ(llm42_session_options_set_max_batch_tokens(so, 64), LLM42_OK);
  EXPECT_EQ(llm42_session_create(so, &s), LLM42_OK) << llm42_last_error();
  llm42_determinism_destroy(d);
  llm42_session_options_destroy(so);
  return s;
}

// Whether a finished request's status and finish reason agree.
bool Consistent(llm42_request* r) {
  const llm42_status st = llm42_request_status(r);
  switch (llm42_request_finish_reason(r)) {
    case LLM42_FINISH_STOP:
    case LLM42_FINISH_LENGTH: return st == LLM42_OK;
    case LLM42_FINISH_CANCELLED: return st == LLM42_CANCELLED;
    default: return false;  // NONE after finishing, or ERROR: nothing here should fail
  }
}

TEST(Stress, SixteenThreadsOfRandomRequestsThenDestroyInFlight) {
  LLM42_SHARED_OR_SKIP(model, "models/stories260K.gguf");
  llm42::testing::Watchdog dog(170);
  llm42_set_log_level(LLM42_LOG_ERROR);
  llm42_session* s = Open(model);
  ASSERT_NE(s, nullptr);
  std::vector<Output> reference;
  for (const Spec& spec : kSpecs) {  // each alone
    llm42_request_options* ro = Options(spec);
    llm42_request* r = nullptr;
    ASSERT_EQ(llm42_request_submit(s, ro, &r), LLM42_OK);
    ASSERT_EQ(llm42_request_wait(r, -1), LLM42_OK);
    reference.push_back(Read(r));
    ASSERT_FALSE(reference.back().tokens.empty());
    llm42_request_destroy(r);
    llm42_request_options_destroy(ro);
  }

  constexpr int kThreads = 16, kPerThread = llm42::testing::kThreadSanitizer ? 40 : 125;
  std::atomic<int> finished{0}, cancelled{0}, deterministic_checked{0}, dropped{0}, refused{0}, failures{0};
  std::mutex failure_mu;
  std::string first_failure;
  const auto fail = [&](const std::string& what) {
    ++failures;
    std::lock_guard<std::mutex> lock(failure_mu);
    if (first_failure.empty()) first_failure = what;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<uint32_t>(1000 + t));
      const auto coin = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)) == 0; };
      for (int i = 0; i < kPerThread; ++i) {
        const bool deterministic = coin(3);
        const int spec = static_cast<int>(rng() % kSpecCount);
        llm42_request_options* ro = nullptr;
        if (deterministic) {
          ro = Options(kSpecs[spec]);
        } else {
          llm42_request_options_create(&ro);
          const std::string prompt = std::string(kSpecs[spec].prompt).substr(0, 1 + rng() % 8);
          llm42_request_options_set_prompt(ro, prompt.data(), prompt.size());
          llm42_request_options_set_max_tokens(ro, 1 + static_cast<int32_t>(rng() % 16));
          llm42_request_options_set_temperature(ro, static_cast<float>(rng() % 150) / 100.0f);
          llm42_request_options_set_top_k(ro, static_cast<int32_t>(rng() % 50));
          llm42_request_options_set_top_p(ro, 0.05f + static_cast<float>(rng() % 95) / 100.0f);
          llm42_request_options_set_min_p(ro, static_cast<float>(rng() % 20) / 100.0f);
          if (coin(4)) llm42_request_options_add_stop(ro, "the");
        }
        // Refused values leave the options as they were (the deterministic spec stays intact).
        if (coin(5)) {
          const float bad[] = {NAN, INFINITY, -1.0f, 1e9f};
          if (llm42_request_options_set_temperature(ro, bad[rng() % 4]) != LLM42_OUT_OF_RANGE) fail("bad temperature accepted");
          if (llm42_request_options_set_max_tokens(ro, -5) != LLM42_OUT_OF_RANGE) fail("max_tokens -5 accepted");
          ++refused;
        }
        llm42_request* r = nullptr;
        if (llm42_request_submit(s, ro, &r) != LLM42_OK) {
          fail(std::string("submit: ") + llm42_last_error());
          llm42_request_options_destroy(ro);
          continue;
        }
        llm42_request_options_destroy(ro);  // the request keeps what it needs
        if (coin(8)) {
          llm42_request_destroy(r);  // unread, maybe running
          ++dropped;
          continue;
        }
        if (coin(6)) llm42_request_cancel(r);
        // Read to the end: zero or 1 ms timeouts, small buffers.
        char buf[5];
        size_t n = 0;
        for (int spins = 0;; ++spins) {
          const llm42_status st = llm42_request_read_text(r, buf, sizeof buf, &n, static_cast<int32_t>(rng() % 2));
          if (st == LLM42_OK && n == 0 && llm42_request_is_finished(r)) break;
          if (st != LLM42_OK && st != LLM42_TIMEOUT) {
            fail(std::string("read_text: ") + llm42_status_name(st));
            break;
          }
          if (spins % 64 == 63) std::this_thread::yield();
        }
        if (!Consistent(r)) fail("status and finish reason disagree");
        ++finished;
        if (llm42_request_finish_reason(r) == LLM42_FINISH_CANCELLED) {
          ++cancelled;
        } else if (deterministic) {
          if (!(Read(r) == reference[static_cast<size_t>(spec)])) fail(std::string("deterministic output differs: ") + kSpecs[spec].prompt);
          ++deterministic_checked;
        }
        llm42_request_destroy(r);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0) << first_failure;
  EXPECT_EQ(finished.load() + dropped.load(), kThreads * kPerThread);
  EXPECT_GT(cancelled.load(), 0);
  EXPECT_GT(deterministic_checked.load(), kThreads * kPerThread / 20);
  EXPECT_GT(refused.load(), 0);
  int64_t preemptions = 0, rollbacks = 0;
  EXPECT_EQ(llm42_session_stat(s, LLM42_STAT_PREEMPTIONS, &preemptions), LLM42_OK);
  EXPECT_EQ(llm42_session_stat(s, LLM42_STAT_ROLLBACKS, &rollbacks), LLM42_OK);
  EXPECT_GT(preemptions, 0) << "the KV pool was meant to force preemption";
  EXPECT_GT(rollbacks, 0) << "the fast-path noise was meant to force rollbacks";

  // The session destroyed with requests running: each ends cancelled; the handles outlive it.
  std::vector<llm42_request*> in_flight;
  for (int i = 0; i < 16; ++i) {
    llm42_request_options* ro = Options(kSpecs[i % kSpecCount]);
    llm42_request_options_set_max_tokens(ro, 400);
    llm42_request_options_set_ignore_eos(ro, 1);
    llm42_request* r = nullptr;
    ASSERT_EQ(llm42_request_submit(s, ro, &r), LLM42_OK);
    in_flight.push_back(r);
    llm42_request_options_destroy(ro);
  }
  llm42_session_destroy(s);
  for (llm42_request* r : in_flight) {
    EXPECT_TRUE(llm42_request_is_finished(r));
    EXPECT_TRUE(Consistent(r));
    size_t n = 0;
    char buf[8];
    while (llm42_request_read_text(r, buf, sizeof buf, &n, 0) == LLM42_OK && n > 0) {
    }
    llm42_request_destroy(r);
  }
}

// The watchdog itself: a test that hangs dies with every thread's stack.
TEST(StressDeathTest, TheWatchdogDumpsEveryThreadAndAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        llm42::testing::Watchdog dog(1);
        std::thread stuck([] { std::this_thread::sleep_for(std::chrono::seconds(30)); });
        stuck.join();
      },
      "no progress after 1 s(.|\n)*--- thread");
}

// A KV pool or model that does not fit is a status, not an abort.
TEST(Stress, AllocationsThatCannotSucceedAreStatuses) {
  LLM42_SHARED_OR_SKIP(model, "models/stories260K.gguf");
  llm42_session_options* so = nullptr;
  ASSERT_EQ(llm42_session_options_create(&so), LLM42_OK);
  ASSERT_EQ(llm42_session_options_set_model_path(so, model.c_str()), LLM42_OK);
  ASSERT_EQ(llm42_session_options_set_kv_cache_tokens(so, int64_t{1} << 40), LLM42_OK);  // petabytes
  llm42_session* s = nullptr;
  EXPECT_EQ(llm42_session_create(so, &s), LLM42_RESOURCE_EXHAUSTED) << llm42_last_error();
  EXPECT_EQ(s, nullptr);
  llm42_session_options_destroy(so);
}

}  // namespace
