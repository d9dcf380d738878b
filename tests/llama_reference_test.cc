// stories260K against llama.cpp's own outputs (shared/reference/stories260K_llamacpp.json).
#include <cmath>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/engine/session.h"
#include "lib/kv/kv_cache.h"
#include "lib/model/model_weights.h"
#include "lib/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"
#include "tests/model_fixture.h"
#include "tests/test_util.h"

namespace llm42 {
namespace {

using nlohmann::json;

class LlamaReferenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_path_ = testing::SharedPath("models/stories260K.gguf");
    const std::string ref = testing::SharedPath("reference/stories260K_llamacpp.json");
    if (!std::filesystem::exists(model_path_) || !std::filesystem::exists(ref)) {
      GTEST_SKIP() << "stories260K or its llama.cpp reference is missing under "
                   << testing::SharedPath("") << "; place the shared/ folder beside the repo";
    }
    reference_ = json::parse(testing::ReadFile(ref));
  }

  // Greedy generation through the engine.
  std::vector<int32_t> Generate(const std::vector<int32_t>& prompt, int32_t n, int threads = 1) {
    SessionOptions o;
    o.model_path = model_path_;
    o.threads = threads;
    auto session = Session::Create(o);
    EXPECT_TRUE(session.ok()) << session.status();
    if (!session.ok()) return {};
    RequestOptions r;
    r.prompt_tokens = prompt;
    r.has_prompt_tokens = true;
    r.max_tokens = n;
    r.ignore_eos = true;
    auto request = (*session)->Submit(r, nullptr);
    EXPECT_TRUE(request.ok()) << request.status();
    if (!request.ok()) return {};
    (*request)->Wait(-1);
    EXPECT_TRUE((*request)->status().ok()) << (*request)->status();
    return (*request)->output_tokens();
  }

  // Logits after prefilling `prompt` in one pass, or token by token.
  std::vector<float> LastLogits(const std::vector<int32_t>& prompt, bool simd, bool one_by_one,
                                Schedule schedule = Schedule::kFast) {
    auto file = GgufFile::Open(model_path_);
    EXPECT_TRUE(file.ok());
    auto model = ModelWeights::Load(std::shared_ptr<const GgufFile>(std::move(file).value()));
    EXPECT_TRUE(model.ok()) << model.status();
    const ModelConfig& c = (*model)->config();
    CpuBackend backend(2, simd);
    KvCache cache(16);
    auto runner = testing::MakeRunner(**model, backend, cache);
    std::vector<float> logits(static_cast<size_t>(c.n_vocab));
    const int32_t slot = cache.Create();
    EXPECT_TRUE(cache.Reserve(slot, static_cast<int64_t>(prompt.size())));
    const auto n = static_cast<int32_t>(prompt.size());
    std::vector<int32_t> positions, slots;
    for (int32_t i = 0; i < n; ++i) {
      positions.push_back(i);
      slots.push_back(slot);
    }
    if (one_by_one) {
      const int32_t row = 0;
      for (int32_t i = 0; i < n; ++i) {
        EXPECT_TRUE(runner->Forward(cache,
                                    ForwardBatch{std::span(prompt).subspan(static_cast<size_t>(i), 1),
                                                 std::span(positions).subspan(static_cast<size_t>(i), 1),
                                                 std::span(slots).subspan(0, 1), std::span(&row, 1), schedule},
                                    logits.data())
                        .ok());
      }
    } else {
      const int32_t last = n - 1;
      EXPECT_TRUE(runner->Forward(cache, ForwardBatch{prompt, positions, slots, std::span(&last, 1), schedule},
                                  logits.data())
                      .ok());
    }
    return logits;
  }

  std::string model_path_;
  json reference_;
};

TEST_F(LlamaReferenceTest, PromptIdsMatch) {
  auto file = GgufFile::Open(model_path_);
  ASSERT_TRUE(file.ok());
  auto tok = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(tok.ok());
  for (const json& r : reference_["results"]) {
    EXPECT_EQ((*tok)->Encode(r["prompt"].get<std::string>(), true, true),
              r["prompt_token_ids"].get<std::vector<int32_t>>())
        << r["prompt"];
  }
}

TEST_F(LlamaReferenceTest, Greedy32TokensMatch) {
  for (const json& r : reference_["results"]) {
    const auto expected = r["generated_token_ids"].get<std::vector<int32_t>>();
    ASSERT_EQ(expected.size(), 32u);
    EXPECT_EQ(Generate(r["prompt_token_ids"].get<std::vector<int32_t>>(), 32), expected) << r["prompt"];
  }
}

TEST_F(LlamaReferenceTest, Greedy200FromBosMatches) {
  const json& r = reference_["extra_bos_only_greedy_200"];
  const auto expected = r["generated_token_ids"].get<std::vector<int32_t>>();
  ASSERT_EQ(expected.size(), 200u);
  EXPECT_EQ(Generate(r["prompt_token_ids"].get<std::vector<int32_t>>(), 200, /*threads=*/2), expected);
}

TEST_F(LlamaReferenceTest, GeneratedTextMatches) {
  const json& r = reference_["results"][0];
  auto file = GgufFile::Open(model_path_);
  ASSERT_TRUE(file.ok());
  auto tok = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(tok.ok());
  std::string text;
  for (int32_t id : r["generated_token_ids"].get<std::vector<int32_t>>()) text += (*tok)->TokenBytes(id);
  EXPECT_EQ(text, r["generated_text"].get<std::string>());
}

// |ours - llama.cpp| <= 1e-3 * max(|llama.cpp|, 1): relative, with an absolute floor for logits
// near zero.
void ExpectLogitsClose(const std::vector<float>& ours, const std::vector<float>& ref,
                       const std::string& what) {
  ASSERT_EQ(ours.size(), ref.size());
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double tol = 1e-3 * std::max(1.0, std::fabs(static_cast<double>(ref[i])));
    const double err = std::fabs(static_cast<double>(ours[i]) - ref[i]);
    worst = std::max(worst, err / tol);
    EXPECT_LE(err, tol) << what << ": logit " << i;
  }
  ::testing::Test::RecordProperty(what, std::to_string(worst));
}

TEST_F(LlamaReferenceTest, LastPositionLogitsMatch) {
  for (const json& r : reference_["results"]) {
    const auto prompt = r["prompt_token_ids"].get<std::vector<int32_t>>();
    const auto ref = r["last_prompt_position_logits"]["flash_attn_off_kv_f32"]["full"].get<std::vector<float>>();
    const std::string name = r["prompt"].get<std::string>();
    ExpectLogitsClose(LastLogits(prompt, true, false), ref, name + " (simd, batched)");
    ExpectLogitsClose(LastLogits(prompt, false, false), ref, name + " (portable, batched)");
    ExpectLogitsClose(LastLogits(prompt, true, true), ref, name + " (simd, token by token)");
    ExpectLogitsClose(LastLogits(prompt, true, false, Schedule::kFixed), ref, name + " (fixed)");
    ExpectLogitsClose(LastLogits(prompt, false, true, Schedule::kFixed), ref, name + " (fixed, portable)");
  }
}

TEST_F(LlamaReferenceTest, PerStepTop5LogitsMatch) {
  const json& r = reference_["results"][0];
  std::vector<int32_t> seq = r["prompt_token_ids"].get<std::vector<int32_t>>();
  int step = 0;
  for (const json& s : r["greedy_steps_top5__flash_attn_off_kv_f32"]) {
    if (step++ == 8) break;  // a handful of steps covers decode positions; each is a full prefill here
    const std::vector<float> logits = LastLogits(seq, true, false);
    for (const json& pair : s["top5"]) {
      const int id = pair[0].get<int>();
      const double ref = pair[1].get<double>();
      EXPECT_NEAR(logits[static_cast<size_t>(id)], ref, 1e-3 * std::max(1.0, std::fabs(ref)))
          << "step " << step << " token " << id;
    }
    seq.push_back(s["id"].get<int32_t>());
  }
}

}  // namespace
}  // namespace llm42
