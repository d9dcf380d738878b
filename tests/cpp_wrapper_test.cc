// The header-only C++ wrapper (llm42.hpp) against the shared library.
#include "llm42/llm42.hpp"

#include <optional>
#include <string>

#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace {

llm42::api::SessionOptions Options(const std::string& model, int32_t threads) {
  llm42::api::SessionOptions options;
  options.SetModelPath(model).SetThreads(threads);
  return options;
}

TEST(CppWrapper, GeneratesStreamsAndThrowsTypedErrors) {
  LLM42_SHARED_OR_SKIP(model, "models/stories260K.gguf");
  llm42::api::Session session(Options(model, 2));
  EXPECT_EQ(session.VocabSize(), 512);
  EXPECT_EQ(session.Tokenize("Once upon a time", true), (std::vector<int32_t>{1, 403, 407, 261, 378}));
  EXPECT_EQ(session.Detokenize({403, 407, 261, 378}), "Once upon a time");

  llm42::api::RequestOptions request;
  request.SetPrompt("Once upon a time").SetMaxTokens(10).SetLogprobs(true);
  llm42::api::Request r = session.Submit(request);
  std::string streamed;
  while (const std::optional<std::string> piece = r.ReadText(-1)) streamed += *piece;
  EXPECT_EQ(streamed, ", there was a little girl named Lily");
  EXPECT_EQ(r.OutputText(), streamed);
  EXPECT_EQ(r.OutputTokens().size(), 10u);
  const std::vector<float> logprobs = r.Logprobs();
  ASSERT_EQ(logprobs.size(), 10u);
  for (float lp : logprobs) EXPECT_LE(lp, 0.0f);
  EXPECT_EQ(r.FinishReason(), LLM42_FINISH_LENGTH);

  try {
    llm42::api::SessionOptions bad;
    bad.SetModelPath(model + ".missing");
    llm42::api::Session s(bad);
    FAIL() << "opened a missing model";
  } catch (const llm42::api::Error& e) {
    EXPECT_EQ(e.status(), LLM42_NOT_FOUND);
  }
  EXPECT_THROW(request.SetMaxTokens(0), llm42::api::Error);
}

TEST(CppWrapper, SeededSamplingIsReproducible) {
  LLM42_SHARED_OR_SKIP(model, "models/stories260K.gguf");
  llm42::api::SessionOptions options;
  options.SetModelPath(model);
  llm42::api::Session session(options);
  llm42::api::RequestOptions request;
  request.SetPrompt("The cat").SetMaxTokens(40).SetTemperature(0.9f).SetTopP(0.95f).SetSeed(7);
  llm42::api::Request a = session.Submit(request);
  llm42::api::Request b = session.Submit(request);
  a.Wait(-1);
  b.Wait(-1);
  EXPECT_EQ(a.EffectiveSeed(), 7u);
  EXPECT_EQ(a.OutputTokens(), b.OutputTokens());
  request.SetSeed(8);
  llm42::api::Request c = session.Submit(request);
  c.Wait(-1);
  EXPECT_NE(a.OutputTokens(), c.OutputTokens());
}

// The zero-timeout frame loop a game writes: "" is a quiet poll, nullopt the end, so text committed
// between a poll and the end is never dropped. Checked to fail with ReadText returning nullopt on a
// timeout (the old contract's "" for both): the loop then stops at the first quiet poll.
TEST(CppWrapper, ZeroTimeoutLoopLosesNothing) {
  LLM42_SHARED_OR_SKIP(model, "models/stories260K.gguf");
  llm42::api::Session session(Options(model, 1));
  llm42::api::RequestOptions request;
  request.SetPrompt("Once upon a time").SetMaxTokens(200).SetIgnoreEos(true);
  llm42::api::Request r = session.Submit(request);
  std::string streamed;
  int quiet_polls = 0;
  while (const std::optional<std::string> piece = r.ReadText(0)) {
    if (piece->empty()) ++quiet_polls;
    streamed += *piece;
  }
  EXPECT_GT(quiet_polls, 0);  // the loop did meet polls with nothing new
  EXPECT_EQ(r.Status(), LLM42_OK);
  EXPECT_EQ(streamed, r.OutputText());
  EXPECT_EQ(r.OutputTokens().size(), 200u);
}

// A cancelled request's stream ends by throwing CANCELLED (ReadText and ReadTokens), PENDING before.
TEST(CppWrapper, CancelledStreamThrowsAtTheEnd) {
  LLM42_SHARED_OR_SKIP(model, "models/stories260K.gguf");
  llm42::api::Session session(Options(model, 1));
  llm42::api::RequestOptions request;
  request.SetPrompt("Once upon a time").SetMaxTokens(1900).SetIgnoreEos(true);
  llm42::api::Request r = session.Submit(request);
  EXPECT_EQ(r.Status(), LLM42_PENDING);
  EXPECT_NO_THROW(r.CheckStatus());
  ASSERT_TRUE(r.ReadText(-1).has_value());
  r.Cancel();
  try {
    while (r.ReadText(-1)) {
    }
    FAIL() << "a cancelled stream ended quietly";
  } catch (const llm42::api::Error& e) {
    EXPECT_EQ(e.status(), LLM42_CANCELLED);
  }
  EXPECT_EQ(r.Status(), LLM42_CANCELLED);
  EXPECT_THROW(
      for (;;) r.ReadTokens(0),  // after the tokens ReadTokens has not given yet
      llm42::api::Error);
  EXPECT_THROW(r.CheckStatus(), llm42::api::Error);
}

// Session::Generate is the streamed text in one call; what submit refuses throws.
// A SessionLoader's session and a Watcher serving four streams from one thread: every stream is
// llama.cpp's text.
TEST(CppWrapper, LoadsWithoutBlockingAndWatchesManyStreams) {
  LLM42_SHARED_OR_SKIP(model, "models/stories260K.gguf");
  llm42::api::SessionLoader loader(Options(model, 2));
  float last = 0;
  while (!loader.Wait(1)) {
    EXPECT_GE(loader.Progress(), last);
    last = loader.Progress();
  }
  EXPECT_EQ(loader.Progress(), 1.0f);
  llm42::api::Session session = loader.Take();
  llm42::api::RequestOptions request;
  request.SetPrompt("Once upon a time").SetMaxTokens(10);
  std::vector<llm42::api::Request> requests;
  llm42::api::Watcher watcher;
  for (uint64_t i = 0; i < 4; ++i) {
    requests.push_back(session.Submit(request));
    watcher.Add(requests.back(), i);
  }
  std::vector<std::string> texts(4);
  for (size_t ended = 0; ended < 4;) {
    const std::vector<uint64_t> tags = watcher.Wait(20000);
    ASSERT_FALSE(tags.empty());
    for (uint64_t tag : tags) {
      for (;;) {
        const std::optional<std::string> piece = requests[tag].ReadText(0);
        if (!piece) {
          ++ended;
          break;
        }
        if (piece->empty()) break;
        texts[tag] += *piece;
      }
    }
  }
  for (const std::string& text : texts) EXPECT_EQ(text, ", there was a little girl named Lily");
}

TEST(CppWrapper, GenerateIsTheStreamedText) {
  LLM42_SHARED_OR_SKIP(model, "models/stories260K.gguf");
  llm42::api::Session session(Options(model, 2));
  llm42::api::RequestOptions request;
  request.SetPrompt("Once upon a time").SetMaxTokens(10);
  EXPECT_EQ(session.Generate(request), ", there was a little girl named Lily");
  llm42::api::RequestOptions empty;
  try {
    session.Generate(empty);
    FAIL() << "generated without a prompt";
  } catch (const llm42::api::Error& e) {
    EXPECT_EQ(e.status(), LLM42_INVALID_ARGUMENT);
  }
}

}  // namespace
