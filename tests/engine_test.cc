// The session and request lifecycle on stories260K: stops, streaming, cancel, threads.
#include <atomic>
#include <cmath>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/engine/session.h"
#include "lib/engine/testing_hooks.h"
#include "lib/grammar/grammar_matcher.h"
#include "lib/engine/text_stream.h"
#include "lib/maker/gguf_writer.h"
#include "lib/tokenizer/tokenizer.h"
#include "tests/model_fixture.h"
#include "tests/test_util.h"

namespace llm42 {
namespace {

TEST(TextStream, HoldsBackPossibleStopStrings) {
  TextStream s({"END", "\n\n"});
  std::string out;
  EXPECT_FALSE(s.Push("Hello E", &out));
  EXPECT_EQ(out, "Hello ");  // "E" might begin "END"
  EXPECT_FALSE(s.Push("N", &out));
  EXPECT_EQ(out, "Hello ");
  EXPECT_FALSE(s.Push("Z line\n", &out));
  EXPECT_EQ(out, "Hello ENZ line");  // the "\n" might begin "\n\n"
  EXPECT_TRUE(s.Push("\nmore", &out));
  EXPECT_EQ(out, "Hello ENZ line");
}

TEST(TextStream, StopsBeforeTheStopString) {
  TextStream s({"END"});
  std::string out;
  EXPECT_FALSE(s.Push("abc E", &out));
  EXPECT_TRUE(s.Push("ND tail", &out));
  EXPECT_EQ(out, "abc ");
}

TEST(TextStream, ReleasesHeldTextWhenTheMatchFails) {
  TextStream s({"END"});
  std::string out;
  s.Push("xE", &out);
  EXPECT_EQ(out, "x");
  s.Push("Nx", &out);
  EXPECT_EQ(out, "xENx");
  s.Push("EN", &out);
  s.Finish(&out);
  EXPECT_EQ(out, "xENxEN");
}

TEST(TextStream, NeverSplitsACharacter) {
  TextStream s({});
  std::string out;
  s.Push("\xE2", &out);
  EXPECT_EQ(out, "");
  s.Push("\x96\x81", &out);
  EXPECT_EQ(out, "\xE2\x96\x81");
}

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::SharedPath("models/stories260K.gguf");
    if (!std::filesystem::exists(model_)) {
      GTEST_SKIP() << model_ << " is missing; place the shared/ folder beside the repo";
    }
  }

  std::unique_ptr<Session> Open(const std::string& path, int threads = 1, int context = 0) {
    SessionOptions o;
    o.model_path = path;
    o.threads = threads;
    o.context_length = context;
    auto s = Session::Create(o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(s).value() : nullptr;
  }

  static RequestOptions Prompt(const std::string& text, int max_tokens) {
    RequestOptions r;
    r.prompt_text = text;
    r.has_prompt_text = true;
    r.max_tokens = max_tokens;
    return r;
  }

  std::string model_;
};

// Greedy continuation of "Once upon a time" per llama.cpp: ", there was a little girl named Lily."
TEST_F(EngineTest, StopStringEndsTheTextBeforeIt) {
  auto s = Open(model_);
  RequestOptions r = Prompt("Once upon a time", 64);
  r.stops = {" Lily"};
  auto req = s->Submit(r, nullptr);
  ASSERT_TRUE(req.ok());
  (*req)->Wait(-1);
  EXPECT_EQ((*req)->finish_reason(), FinishReason::kStop);
  EXPECT_EQ((*req)->output_text(), ", there was a little girl named");
  EXPECT_EQ((*req)->output_tokens().back(), 317);  // " Lily"
}

// Requests with one grammar share its compiled masks and tables (token_grammar.h), computed under
// its locks while the step's draws run on host threads: sampled requests, two threads, three
// rounds of six at once, plain and deterministic; every output is a prefix the grammar accepts.
// Run under ThreadSanitizer by tools/tsan.sh.
TEST_F(EngineTest, RequestsShareAGrammarAcrossHostThreads) {
  auto s = Open(model_, 2);
  const auto grammar = *RequestOptions::MakeOutputGrammar(
      RequestOptions::OutputGrammar::Kind::kJsonSchema,
      R"({"type": "array", "items": {"type": "object", "properties": {"w": {"type": "string"},
          "n": {"type": "integer"}}, "required": ["w"]}})");
  for (int round = 0; round < 3; ++round) {
    std::vector<std::shared_ptr<Request>> running;
    for (int i = 0; i < 6; ++i) {
      RequestOptions r = Prompt("Once upon a time", 40);
      r.output_grammar = grammar;
      r.sampling.temperature = 0.9f;
      r.sampling.seed = static_cast<uint64_t>(round * 10 + i);
      r.has_seed = true;
      r.deterministic = i % 2 == 0;
      r.controls.repetition_penalty = 1.1f;
      auto q = s->Submit(r, nullptr);
      ASSERT_TRUE(q.ok()) << q.status();
      running.push_back(*q);
    }
    for (auto& q : running) {
      ASSERT_TRUE(q->Wait(120000));
      ASSERT_TRUE(q->status().ok()) << q->status();
      GrammarMatcher m(grammar.grammar.get());
      EXPECT_TRUE(m.AcceptText(q->output_text())) << q->output_text();
    }
  }
  EXPECT_EQ(s->invariant_violations(), 0);
}

// The CPU backend taking the device's path (TestingHooks::DrawOnCpuBackend: sampled rows drawn,
// and controlled rows controlled, by Backend::DrawRows and ControlRows inside the forward pass)
// commits what the host's draws from the logits commit: the tokens, logprobs and top logprobs of
// requests with a JSON grammar (sampled and greedy), logit bias and penalties, deterministic ones
// at once (their candidates and replays) and plain ones alone. Fails when the model runner skips
// ControlRows, and when the replay's draws are made at the next position (checked).
TEST_F(EngineTest, DrawsWhereTheLogitsAreCommitTheHostsDraws) {
  const auto grammar = *RequestOptions::MakeOutputGrammar(
      RequestOptions::OutputGrammar::Kind::kJsonSchema,
      R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"]})");
  auto requests = [&] {
    std::vector<RequestOptions> all;
    for (int i = 0; i < 6; ++i) {
      RequestOptions r = Prompt("Once upon a time", 24);
      r.deterministic = i < 4;
      r.sampling.temperature = i == 1 ? 0.0f : 0.8f;
      r.sampling.top_p = i == 3 ? 0.9f : 1.0f;
      r.sampling.seed = 7 + static_cast<uint64_t>(i);
      r.has_seed = true;
      r.logprobs = i != 1;
      r.top_logprobs = i % 3 == 0 ? 3 : 0;
      if (i <= 1 || i == 4) r.output_grammar = grammar;
      if (i >= 2) r.controls.repetition_penalty = 1.3f;
      if (i >= 3) r.controls.SetBias(317, 2.0f);  // " Lily"
      all.push_back(r);
    }
    return all;
  };
  struct Output {
    std::vector<int32_t> tokens;
    std::vector<float> logprobs;
    std::vector<TopLogprob> top;
    bool operator==(const Output&) const = default;
  };
  auto run = [&](bool on_backend) {
    SessionOptions so;
    so.model_path = model_;
    so.threads = 2;
    so.determinism.decode_path = DecodePath::kVerify;  // candidates and their replays, never direct
    TestingHooks::DrawOnCpuBackend().store(on_backend ? 1 : 0);
    auto created = Session::Create(so);
    TestingHooks::DrawOnCpuBackend().store(0);
    std::vector<Output> out;
    EXPECT_TRUE(created.ok()) << created.status();
    if (!created.ok()) return out;
    auto s = *std::move(created);
    std::vector<std::shared_ptr<Request>> at_once;
    for (const RequestOptions& r : requests()) {
      if (!r.deterministic) continue;
      auto q = s->Submit(r, nullptr);
      EXPECT_TRUE(q.ok()) << q.status();
      if (q.ok()) at_once.push_back(*q);
    }
    for (const RequestOptions& r : requests()) {
      std::shared_ptr<Request> q;
      if (r.deterministic) {
        q = at_once.front();
        at_once.erase(at_once.begin());
      } else {
        auto alone = s->Submit(r, nullptr);
        EXPECT_TRUE(alone.ok()) << alone.status();
        if (!alone.ok()) continue;
        q = *alone;
      }
      EXPECT_TRUE(q->Wait(120000));
      EXPECT_TRUE(q->status().ok()) << q->status();
      out.push_back(Output{q->output_tokens(), q->logprobs(), q->top_logprobs()});
    }
    EXPECT_EQ(s->invariant_violations(), 0);
    return out;
  };
  const std::vector<Output> host = run(false);
  ASSERT_EQ(host.size(), 6u);
  EXPECT_EQ(run(true), host);
}

TEST_F(EngineTest, MaxTokensEndsWithLength) {
  auto s = Open(model_);
  auto req = s->Submit(Prompt("Once upon a time", 7), nullptr);
  ASSERT_TRUE(req.ok());
  (*req)->Wait(-1);
  EXPECT_EQ((*req)->finish_reason(), FinishReason::kLength);
  EXPECT_EQ((*req)->output_tokens().size(), 7u);
  EXPECT_EQ((*req)->stat(Stat::kPrefillTokens), 5);
  EXPECT_EQ((*req)->stat(Stat::kDecodeSteps), 6);
  EXPECT_GE((*req)->stat(Stat::kTimeToFirstTokenUs), 0);
}

TEST_F(EngineTest, ContextFullEndsWithLength) {
  auto s = Open(model_, 1, /*context=*/16);
  auto req = s->Submit(Prompt("Once upon a time", 100), nullptr);
  ASSERT_TRUE(req.ok());
  (*req)->Wait(-1);
  EXPECT_EQ((*req)->finish_reason(), FinishReason::kLength);
  EXPECT_EQ((*req)->output_tokens().size(), 16u - 5u);
}

// stories260K never emits its EOS, so this copy declares "," (id 432, the first greedy token
// after "Once upon a time") to be EOS.
TEST_F(EngineTest, EosStopsUnlessIgnored) {
  const std::string path = testing::CopyModel(
      model_, "stories_eos_comma.gguf",
      [](const std::string& key, GgufValue&) { return key != "tokenizer.ggml.eos_token_id"; },
      [](GgufWriter& w) { w.AddUint32("tokenizer.ggml.eos_token_id", 432); });
  ASSERT_FALSE(path.empty());
  auto s = Open(path);
  auto req = s->Submit(Prompt("Once upon a time", 32), nullptr);
  ASSERT_TRUE(req.ok());
  (*req)->Wait(-1);
  EXPECT_EQ((*req)->finish_reason(), FinishReason::kStop);
  EXPECT_EQ((*req)->output_tokens(), std::vector<int32_t>{432});

  RequestOptions r = Prompt("Once upon a time", 32);
  r.ignore_eos = true;
  auto ignoring = s->Submit(r, nullptr);
  ASSERT_TRUE(ignoring.ok());
  (*ignoring)->Wait(-1);
  EXPECT_EQ((*ignoring)->finish_reason(), FinishReason::kLength);
  EXPECT_EQ((*ignoring)->output_tokens().size(), 32u);
}

// A prompt that fits the context but not the whole KV cache (48 tokens of cache, 512 of
// context) is refused at Submit with RESOURCE_EXHAUSTED, nothing queued, and the session
// still serves a prompt that fits.
TEST_F(EngineTest, APromptLargerThanTheWholeKvCacheIsRefused) {
  SessionOptions o;
  o.model_path = model_;
  o.threads = 1;
  o.kv_cache_tokens = 48;
  auto s = Session::Create(o);
  ASSERT_TRUE(s.ok()) << s.status();
  RequestOptions big;
  big.prompt_tokens.assign(100, 1);
  big.has_prompt_tokens = true;
  const auto refused = (*s)->Submit(big, nullptr);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()), ::testing::HasSubstr("the whole KV cache holds"));
  auto fits = (*s)->Submit(Prompt("Once upon a time", 4), nullptr);
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_TRUE((*fits)->Wait(60000));
  EXPECT_EQ((*fits)->output_tokens().size(), 4u);
}

// Tokenizer metadata that disagrees with the weights: a copy of stories260K whose vocabulary
// lost its last 8 tokens (token_embd.weight keeps 512 rows) is refused at session creation,
// naming both sizes, instead of sampling ids the tokenizer cannot decode.
TEST_F(EngineTest, AVocabularySmallerThanTheEmbeddingIsRefused) {
  const std::string path = testing::CopyModel(model_, "stories_short_vocab.gguf", [](const std::string& key, GgufValue& v) {
    if (key == "tokenizer.ggml.tokens") v.string_array.resize(v.string_array.size() - 8);
    if (key == "tokenizer.ggml.scores") v.float_array.resize(v.float_array.size() - 8);
    if (key == "tokenizer.ggml.token_type") v.int_array.resize(v.int_array.size() - 8);
    return true;
  });
  ASSERT_FALSE(path.empty());
  SessionOptions o;
  o.model_path = path;
  o.threads = 1;
  auto s = Session::Create(o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kDataLoss) << s.status();
  EXPECT_THAT(std::string(s.status().message()), ::testing::HasSubstr("512 rows but the vocabulary has 504 tokens"));
}

TEST_F(EngineTest, StreamedReadsConcatenateToTheOutput) {
  auto s = Open(model_);
  auto req = s->Submit(Prompt("The cat", 120), nullptr);
  ASSERT_TRUE(req.ok());
  std::string text;
  std::vector<int32_t> tokens;
  char buf[5];  // small, to exercise partial reads at character boundaries
  int32_t ids[3];
  for (;;) {
    size_t n = 0, m = 0;
    const absl::Status st = (*req)->ReadText(buf, sizeof buf, &n, 1000);
    ASSERT_TRUE(st.ok() || absl::IsDeadlineExceeded(st)) << st;
    text.append(buf, n);
    ASSERT_TRUE((*req)->ReadTokens(ids, 3, &m, 0).ok() || m == 0);
    tokens.insert(tokens.end(), ids, ids + m);
    if (st.ok() && n == 0) break;
  }
  for (size_t m = 1; m > 0;) {
    ASSERT_TRUE((*req)->ReadTokens(ids, 3, &m, 0).ok());
    tokens.insert(tokens.end(), ids, ids + m);
  }
  EXPECT_EQ(text, (*req)->output_text());
  EXPECT_EQ(tokens, (*req)->output_tokens());
  size_t n = 7;
  EXPECT_TRUE((*req)->ReadText(buf, sizeof buf, &n, -1).ok());  // finished and drained: at once
  EXPECT_EQ(n, 0u);
}

TEST_F(EngineTest, CancelFromAnotherThread) {
  auto s = Open(model_, 1);
  RequestOptions r = Prompt("Once upon a time", 4000);
  r.ignore_eos = true;
  auto req = s->Submit(r, nullptr);
  ASSERT_TRUE(req.ok());
  size_t n = 0;
  int32_t tok;
  ASSERT_TRUE((*req)->ReadTokens(&tok, 1, &n, -1).ok());  // it is running
  std::thread([&] { (*req)->Cancel(); }).join();
  EXPECT_TRUE((*req)->Wait(10000));
  EXPECT_EQ((*req)->finish_reason(), FinishReason::kCancelled);
  EXPECT_EQ((*req)->status().code(), absl::StatusCode::kCancelled);
  EXPECT_LT((*req)->output_tokens().size(), 2000u);
}

TEST_F(EngineTest, RejectsBadRequests) {
  auto s = Open(model_, 1, 16);
  RequestOptions none;
  EXPECT_EQ(s->Submit(none, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  RequestOptions bad_id;
  bad_id.prompt_tokens = {1, 512};
  bad_id.has_prompt_tokens = true;
  EXPECT_EQ(s->Submit(bad_id, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  RequestOptions too_long = Prompt(std::string(200, 'a'), 4);
  EXPECT_EQ(s->Submit(too_long, nullptr).status().code(), absl::StatusCode::kOutOfRange);
  // The options' own rules (RequestOptions::Validate) hold for C++ callers too, with the codes
  // the C ABI's setters return: before, only the C shim checked sampling ranges and stops.
  const auto refused = [&](void (*spoil)(RequestOptions&)) {
    RequestOptions o = Prompt("ab", 4);
    spoil(o);
    return s->Submit(o, nullptr).status().code();
  };
  EXPECT_EQ(refused([](RequestOptions& o) { o.sampling.temperature = -1; }), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(refused([](RequestOptions& o) { o.sampling.temperature = std::nanf(""); }), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(refused([](RequestOptions& o) { o.sampling.top_p = 0; }), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(refused([](RequestOptions& o) { o.sampling.min_p = 1; }), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(refused([](RequestOptions& o) { o.sampling.top_k = -1; }), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(refused([](RequestOptions& o) { o.max_tokens = 0; }), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(refused([](RequestOptions& o) { o.stops.assign(17, "x"); }), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(refused([](RequestOptions& o) { o.stops = {""}; }), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused([](RequestOptions& o) { o.prompt_text = "bad \xFF"; }), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused([](RequestOptions& o) { o.top_logprobs = 21; }), absl::StatusCode::kOutOfRange);
}

// Many threads submit, read, cancel and drop requests at once. Every request ends with a
// status matching how it ended, and every greedy request that ran to completion produced the
// same tokens as the same prompt run alone.
TEST_F(EngineTest, ConcurrentClientsWithRandomCancels) {
  auto s = Open(model_, 2);
  const std::vector<std::string> prompts = {"Once upon a time", "The cat", "Lily", "One day"};
  std::vector<std::vector<int32_t>> solo;
  for (const std::string& p : prompts) {
    auto r = s->Submit(Prompt(p, 24), nullptr);
    ASSERT_TRUE(r.ok());
    (*r)->Wait(-1);
    solo.push_back((*r)->output_tokens());
  }
  std::atomic<int> completed{0}, cancelled{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<uint32_t>(t));
      for (int i = 0; i < 6; ++i) {
        const size_t which = rng() % prompts.size();
        auto r = s->Submit(Prompt(prompts[which], 24), nullptr);
        if (!r.ok()) {
          ++failures;
          continue;
        }
        if (rng() % 3 == 0) (*r)->Cancel();
        if (rng() % 5 == 0) continue;  // drop the handle without waiting
        (*r)->Wait(-1);
        if ((*r)->finish_reason() == FinishReason::kCancelled) {
          cancelled += (*r)->status().code() == absl::StatusCode::kCancelled ? 1 : 0;
          failures += (*r)->status().code() == absl::StatusCode::kCancelled ? 0 : 1;
        } else {
          ++completed;
          if ((*r)->finish_reason() != FinishReason::kLength || !(*r)->status().ok() ||
              (*r)->output_tokens() != solo[which]) {
            ++failures;
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GT(completed.load(), 0);
  EXPECT_GT(cancelled.load(), 0);
}

TEST_F(EngineTest, DestroyingTheSessionCancelsEverything) {
  std::vector<std::shared_ptr<Request>> requests;
  {
    auto s = Open(model_, 1);
    for (int i = 0; i < 5; ++i) {
      RequestOptions r = Prompt("Once upon a time", 1500);
      r.ignore_eos = true;
      auto req = s->Submit(r, nullptr);
      ASSERT_TRUE(req.ok());
      requests.push_back(*req);
    }
  }
  for (auto& r : requests) {
    EXPECT_TRUE(r->finished());
    EXPECT_EQ(r->finish_reason(), FinishReason::kCancelled);
  }
}

TEST(VocabOnlySession, TokenizesButCannotGenerate) {
  LLM42_SHARED_OR_SKIP(vocab, "vocab/ggml-vocab-llama-bpe.gguf");
  SessionOptions o;
  o.model_path = vocab;
  auto refused = Session::Create(o);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(refused.status().message()), ::testing::HasSubstr("vocab_only"));
  o.vocab_only = true;
  auto s = Session::Create(o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->tokenizer().Encode("Hello world", true, true), (std::vector<int32_t>{128000, 9906, 1917}));
  RequestOptions r;
  r.prompt_text = "Hello";
  r.has_prompt_text = true;
  EXPECT_EQ((*s)->Submit(r, nullptr).status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace llm42
