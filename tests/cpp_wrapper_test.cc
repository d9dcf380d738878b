// The header-only C++ wrapper (llm42.hpp) against the shared library.
#include "llm42/llm42.hpp"

#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace {

TEST(CppWrapper, GeneratesStreamsAndThrowsTypedErrors) {
  LLM42_SHARED_OR_SKIP(model, "models/stories260K.gguf");
  llm42::api::SessionOptions options;
  options.SetModelPath(model).SetThreads(2);
  llm42::api::Session session(options);
  EXPECT_EQ(session.VocabSize(), 512);
  EXPECT_EQ(session.Tokenize("Once upon a time", true), (std::vector<int32_t>{1, 403, 407, 261, 378}));
  EXPECT_EQ(session.Detokenize({403, 407, 261, 378}), "Once upon a time");

  llm42::api::RequestOptions request;
  request.SetPrompt("Once upon a time").SetMaxTokens(10).SetLogprobs(true);
  llm42::api::Request r = session.Submit(request);
  std::string streamed;
  for (std::string piece; !(piece = r.ReadText(-1)).empty();) streamed += piece;
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

}  // namespace
