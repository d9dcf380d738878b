// Reproducibility receipts and model fingerprints (issue 15): a deterministic request's receipt
// replays to the same bits in a fresh session and in a busy one; a damaged or altered receipt is
// refused; another model, another schedule and other output are three different outcomes; the
// fingerprint sees every byte and no thread count.
//
// Proven to fail on a broken build: with ReplayOptions dropping the receipt's seed (has_seed =
// false), ReceiptsReplayBitwise fails (a default seed samples other tokens at T = 0.8); with
// CompareOutput skipping the logprob comparison, AlteredOutputIsFoundWhereItDiffers fails at its
// logprob case.
#include "lib/engine/receipt.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <thread>

#include "gtest/gtest.h"
#include "lib/engine/session.h"
#include "lib/model/fingerprint.h"
#include "tests/model_fixture.h"
#include "tests/test_util.h"

namespace llm42 {
namespace {

class ReceiptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::SmallVocabTinyModelPath();
    if (model_.empty()) GTEST_SKIP() << "../shared/models/stories260K.gguf is missing";
  }

  std::unique_ptr<Session> Open(const std::string& model, const std::string& kv_dtype = "auto", int threads = 2,
                                DeterminismMode mode = DeterminismMode::kSelective, int32_t context = 256,
                                int64_t kv_tokens = 0) {
    SessionOptions o;
    o.model_path = model;
    o.threads = threads;
    o.determinism.mode = mode;
    o.context_length = context;
    o.kv_cache_tokens = kv_tokens;
    o.kv_dtype = kv_dtype;
    auto s = Session::Create(o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(s).value() : nullptr;
  }

  static RequestOptions Spec(bool deterministic, bool logprobs = true) {
    RequestOptions r;
    r.prompt_tokens = {1, 17, 23, 301, 44, 5, 99};
    r.has_prompt_tokens = true;
    r.max_tokens = 24;
    r.ignore_eos = true;
    r.deterministic = deterministic;
    r.logprobs = logprobs;
    r.sampling.temperature = 0.8f;
    r.sampling.top_p = 0.95f;
    r.sampling.seed = 1234;
    r.has_seed = true;
    return r;
  }

  // A finished request's receipt.
  std::string ReceiptOf(Session& s, const RequestOptions& spec) {
    auto r = s.Submit(spec, nullptr);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return {};
    (*r)->Wait(-1);
    auto receipt = (*r)->receipts()->Make(**r);
    EXPECT_TRUE(receipt.ok()) << receipt.status();
    return receipt.ok() ? *receipt : std::string();
  }

  std::string model_;
};

TEST_F(ReceiptTest, ReceiptsReplayBitwise) {
  std::string receipt;
  {
    auto s = Open(model_);
    receipt = ReceiptOf(*s, Spec(true));
  }
  auto parsed = ParseReceipt(receipt);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->output_tokens_size(), 24);
  EXPECT_EQ(parsed->logprobs_size(), 24);
  EXPECT_EQ(parsed->sampling().seed(), 1234u);
  EXPECT_EQ(parsed->schedule().backend(), "cpu");
  EXPECT_EQ(parsed->model().sha256().size(), 64u);
  // The receipt outlives its session; a fresh one reproduces it.
  auto fresh = Open(model_);
  auto check = fresh->VerifyReceipt(receipt);
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_EQ(check->outcome, ReceiptCheck::Outcome::kReproduced) << check->detail;
  // So does a busy one: the replay runs beside other requests.
  std::vector<std::shared_ptr<Request>> others;
  for (int i = 0; i < 6; ++i) {
    RequestOptions o = Spec(false);
    o.prompt_tokens.push_back(50 + i * 7);
    o.max_tokens = 20 + 3 * i;
    o.sampling.seed = static_cast<uint64_t>(i);
    auto r = fresh->Submit(o, nullptr);
    ASSERT_TRUE(r.ok());
    others.push_back(*r);
  }
  check = fresh->VerifyReceipt(receipt);
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_EQ(check->outcome, ReceiptCheck::Outcome::kReproduced) << check->detail;
  // The text form checks the same.
  check = fresh->VerifyReceipt(ReceiptText(*parsed));
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_EQ(check->outcome, ReceiptCheck::Outcome::kReproduced) << check->detail;
  for (auto& o : others) o->Wait(-1);
}

// Made on 1 thread under co-runner load in a selective session; verified alone on 2 threads in a
// batch_invariant one.
TEST_F(ReceiptTest, ReceiptsCrossModesThreadCountsAndLoad) {
  std::string receipt;
  {
    auto busy = Open(model_, "auto", 1);
    std::vector<std::shared_ptr<Request>> others;
    for (int i = 0; i < 5; ++i) {
      RequestOptions o = Spec(false);
      o.prompt_tokens.push_back(70 + i);
      o.max_tokens = 30;
      auto r = busy->Submit(o, nullptr);
      ASSERT_TRUE(r.ok());
      others.push_back(*r);
    }
    receipt = ReceiptOf(*busy, Spec(true));
    for (auto& o : others) o->Wait(-1);
  }
  auto invariant = Open(model_, "auto", 2, DeterminismMode::kBatchInvariant);
  auto c = invariant->VerifyReceipt(receipt);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->outcome, ReceiptCheck::Outcome::kReproduced) << c->detail;
}

// A receipt re-made (valid digest) with another seed or temperature but the original output:
// the replay's tokens part where the other setting's own output parts from the original.
TEST_F(ReceiptTest, ChangedSeedOrSamplingIsFoundWhereTheTokensDiffer) {
  auto s = Open(model_);
  const RequestOptions spec = Spec(true);
  auto r = s->Submit(spec, nullptr);
  ASSERT_TRUE(r.ok());
  (*r)->Wait(-1);
  const std::vector<int32_t> output = (*r)->output_tokens();
  const ReceiptSetup setup = (*r)->receipts()->Setup();
  for (int variant = 0; variant < 2; ++variant) {
    RequestOptions changed = spec;
    if (variant == 0) changed.sampling.seed += 1;
    if (variant == 1) changed.sampling.temperature = 1.1f;
    auto other = s->Submit(changed, nullptr);
    ASSERT_TRUE(other.ok());
    (*other)->Wait(-1);
    const std::vector<int32_t> theirs = (*other)->output_tokens();
    const auto expected = std::mismatch(output.begin(), output.end(), theirs.begin()).first - output.begin();
    ASSERT_LT(expected, static_cast<std::ptrdiff_t>(output.size())) << "variant " << variant << " changed nothing";
    const std::string bytes = MakeReceipt(setup, (*r)->prompt(), changed, changed.sampling.seed, output,
                                          (*r)->logprobs(), FinishReason::kLength);
    auto c = s->VerifyReceipt(bytes);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->outcome, ReceiptCheck::Outcome::kOtherOutput) << "variant " << variant;
    EXPECT_EQ(c->first_difference, expected) << "variant " << variant << ": " << c->detail;
  }
}

// A request's output grammar, logit biases and penalties are part of its receipt: a constrained
// request's receipt reproduces, and the same output claimed under another grammar, penalty or
// bias is found where the replay first differs. Checked to fail with MakeReceipt leaving the
// grammar out (variant 0 then replays as the original and reproduces).
TEST_F(ReceiptTest, GrammarBiasAndPenaltiesAreRecordedAndReplayed) {
  auto s = Open(model_);
  RequestOptions spec = Spec(true);
  spec.max_tokens = 48;
  spec.output_grammar = *RequestOptions::MakeOutputGrammar(RequestOptions::OutputGrammar::Kind::kJsonSchema,
                                                           R"({"type": "array", "items": {"type": "string", "maxLength": 6}})");
  spec.controls.SetBias(3 + 'a', 1.5f);
  spec.controls.SetBias(3 + ',', -0.5f);
  spec.controls.repetition_penalty = 1.2f;
  spec.controls.penalty_last_n = 16;
  spec.controls.frequency_penalty = 0.3f;
  spec.controls.presence_penalty = 0.2f;
  const std::string receipt = ReceiptOf(*s, spec);
  auto parsed = ParseReceipt(receipt);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->sampling().grammar_kind(), OUTPUT_GRAMMAR_JSON_SCHEMA);
  EXPECT_EQ(parsed->sampling().grammar(), spec.output_grammar->source);
  ASSERT_EQ(parsed->sampling().logit_bias_size(), 2);
  EXPECT_EQ(parsed->sampling().logit_bias(0).token(), 3 + ',');
  EXPECT_EQ(parsed->sampling().penalty_last_n(), 16);
  EXPECT_EQ(parsed->sampling().frequency_penalty(), 0.3f);
  auto check = Open(model_)->VerifyReceipt(receipt);
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_EQ(check->outcome, ReceiptCheck::Outcome::kReproduced) << check->detail;
  auto r = s->Submit(spec, nullptr);
  ASSERT_TRUE(r.ok());
  (*r)->Wait(-1);
  const std::vector<int32_t> output = (*r)->output_tokens();
  ASSERT_EQ(output, std::vector<int32_t>(parsed->output_tokens().begin(), parsed->output_tokens().end()));
  for (int variant = 0; variant < 3; ++variant) {
    RequestOptions changed = spec;
    if (variant == 0) changed.output_grammar.reset();
    if (variant == 1) changed.controls.frequency_penalty = 0;
    if (variant == 2) changed.controls.bias.clear();
    auto other = s->Submit(changed, nullptr);
    ASSERT_TRUE(other.ok());
    (*other)->Wait(-1);
    // Where the replay first differs: a token, or a logprob's bits (the changed logits).
    const std::vector<int32_t> theirs = (*other)->output_tokens();
    const std::vector<float> mine_lp = (*r)->logprobs(), theirs_lp = (*other)->logprobs();
    std::ptrdiff_t expected = 0;
    while (static_cast<size_t>(expected) < std::min(output.size(), theirs.size()) &&
           output[static_cast<size_t>(expected)] == theirs[static_cast<size_t>(expected)] &&
           std::memcmp(&mine_lp[static_cast<size_t>(expected)], &theirs_lp[static_cast<size_t>(expected)], sizeof(float)) == 0) {
      ++expected;
    }
    ASSERT_LT(expected, static_cast<std::ptrdiff_t>(output.size())) << "variant " << variant << " changed nothing";
    const std::string bytes = MakeReceipt((*r)->receipts()->Setup(), (*r)->prompt(), changed, changed.sampling.seed,
                                          output, (*r)->logprobs(), (*r)->finish_reason());
    auto c = s->VerifyReceipt(bytes);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->outcome, ReceiptCheck::Outcome::kOtherOutput) << "variant " << variant;
    EXPECT_EQ(c->first_difference, expected) << "variant " << variant << ": " << c->detail;
  }
  // A receipt whose grammar no longer parses is refused as malformed, not replayed unconstrained.
  RequestOptions unparsable = spec;
  unparsable.output_grammar->source = R"({"type": "text"})";
  auto refused = s->VerifyReceipt(MakeReceipt((*r)->receipts()->Setup(), (*r)->prompt(), unparsable, spec.sampling.seed,
                                              output, (*r)->logprobs(), (*r)->finish_reason()));
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("output grammar"), std::string_view::npos) << refused.status();
}

// Issue 55 item 4: forged receipts (digest re-made) whose fields claim what the replay would
// ignore are malformed, never REPRODUCED: penalties without a repetition penalty, a grammar with
// grammar_kind NONE, unknown grammar kinds and finish reasons, biases out of order, a model's
// fingerprint paired with other counts or name. Each forgery's control: the receipt it was made
// from verifies. Checked to fail before CheckConsistent (the penalty and the NONE-grammar
// forgeries verified as REPRODUCED; an unknown grammar_kind was replayed as a JSON schema).
TEST_F(ReceiptTest, ForgedReceiptsThatClaimWhatTheReplayIgnoresAreRefused) {
  auto s = Open(model_);
  const std::string genuine = ReceiptOf(*s, Spec(true));
  auto parsed = ParseReceipt(genuine);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  auto check = s->VerifyReceipt(genuine);
  ASSERT_TRUE(check.ok()) << check.status();
  ASSERT_EQ(check->outcome, ReceiptCheck::Outcome::kReproduced) << check->detail;
  const std::pair<const char*, std::function<void(Receipt&)>> malformed[] = {
      {"without repetition_penalty", [](Receipt& r) { r.mutable_sampling()->set_frequency_penalty(0.5f); }},
      {"without repetition_penalty", [](Receipt& r) { r.mutable_sampling()->set_presence_penalty(-0.5f); }},
      {"without repetition_penalty", [](Receipt& r) { r.mutable_sampling()->set_penalty_last_n(16); }},
      {"none of them on", [](Receipt& r) { r.mutable_sampling()->set_repetition_penalty(1.0f); }},
      {"grammar_kind NONE", [](Receipt& r) { r.mutable_sampling()->set_grammar(R"(root ::= "a")"); }},
      {"without a grammar", [](Receipt& r) { r.mutable_sampling()->set_grammar_kind(OUTPUT_GRAMMAR_GBNF); }},
      {"grammar_kind 7", [](Receipt& r) {
         r.mutable_sampling()->set_grammar_kind(static_cast<OutputGrammarKind>(7));
         r.mutable_sampling()->set_grammar("{}");
       }},
      {"finish_reason 5", [](Receipt& r) { r.set_finish_reason(static_cast<ReceiptFinish>(5)); }},
      {"finish_reason 0", [](Receipt& r) { r.set_finish_reason(RECEIPT_FINISH_NONE); }},
      {"ascending token order", [](Receipt& r) {
         LogitBias* a = r.mutable_sampling()->add_logit_bias();
         a->set_token(9);
         a->set_bias(1);
         LogitBias* b = r.mutable_sampling()->add_logit_bias();
         b->set_token(9);
         b->set_bias(-1);
       }},
  };
  for (const auto& [why, forge] : malformed) {
    Receipt forged = *parsed;
    forge(forged);
    // In both forms: binary, and text (the sealed message printed, its digest included).
    const std::string binary = SealReceipt(forged);
    Receipt sealed;
    ASSERT_TRUE(sealed.ParseFromString(binary));
    for (const std::string& form : {binary, ReceiptText(sealed)}) {
      const auto refused = s->VerifyReceipt(form);
      EXPECT_EQ(refused.status().code(), absl::StatusCode::kDataLoss) << why << ": " << refused.status();
      EXPECT_NE(refused.status().message().find(why), std::string::npos) << refused.status();
    }
  }
  // The model fields the fingerprint covers, paired with the fingerprint by hand.
  for (int field = 0; field < 3; ++field) {
    Receipt forged = *parsed;
    if (field == 0) forged.mutable_model()->set_name("another name");
    if (field == 1) forged.mutable_model()->set_tensors(forged.model().tensors() + 1);
    if (field == 2) forged.mutable_model()->set_tensor_bytes(forged.model().tensor_bytes() - 1);
    auto c = s->VerifyReceipt(SealReceipt(forged));
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->outcome, ReceiptCheck::Outcome::kOtherModel) << "field " << field << ": " << c->detail;
  }
}

TEST_F(ReceiptTest, DamagedOrAlteredBytesAreRefused) {
  auto s = Open(model_);
  const std::string receipt = ReceiptOf(*s, Spec(true));
  ASSERT_FALSE(receipt.empty());
  // Every truncation and every flipped byte: DataLoss (or, rarely, a parse into another valid
  // message whose digest then fails), never a crash or a replay.
  for (size_t n = 0; n < receipt.size(); n += 7) {
    EXPECT_EQ(ParseReceipt(receipt.substr(0, n)).status().code(), absl::StatusCode::kDataLoss) << "first " << n;
  }
  for (size_t i = 0; i < receipt.size(); ++i) {
    std::string bad = receipt;
    bad[i] = static_cast<char>(bad[i] ^ 0x10);
    EXPECT_EQ(ParseReceipt(bad).status().code(), absl::StatusCode::kDataLoss) << "byte " << i;
  }
  // An edited text receipt (one output token changed, digest left) is caught by the digest.
  auto parsed = ParseReceipt(receipt);
  ASSERT_TRUE(parsed.ok());
  Receipt edited = *parsed;
  edited.set_output_tokens(3, edited.output_tokens(3) + 1);
  const auto refused = s->VerifyReceipt(ReceiptText(edited));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(refused.status().message().find("digest"), std::string::npos) << refused.status();
}

// Receipts re-made with a valid digest over other contents: each difference is named.
TEST_F(ReceiptTest, AlteredOutputIsFoundWhereItDiffers) {
  auto s = Open(model_);
  const RequestOptions spec = Spec(true);
  auto r = s->Submit(spec, nullptr);
  ASSERT_TRUE(r.ok());
  (*r)->Wait(-1);
  const ReceiptSetup setup = (*r)->receipts()->Setup();
  const std::vector<int32_t> tokens = (*r)->output_tokens();
  const std::vector<float> logprobs = (*r)->logprobs();
  auto verify = [&](const std::vector<int32_t>& t, const std::vector<float>& lp, ReceiptSetup su = {}) {
    const std::string bytes =
        MakeReceipt(su.backend.empty() ? setup : su, (*r)->prompt(), spec, (*r)->seed(), t, lp, FinishReason::kLength);
    auto check = s->VerifyReceipt(bytes);
    EXPECT_TRUE(check.ok()) << check.status();
    return check.ok() ? *check : ReceiptCheck{};
  };
  EXPECT_EQ(verify(tokens, logprobs).outcome, ReceiptCheck::Outcome::kReproduced);
  std::vector<int32_t> t = tokens;
  t[5] ^= 1;
  ReceiptCheck c = verify(t, logprobs);
  EXPECT_EQ(c.outcome, ReceiptCheck::Outcome::kOtherOutput);
  EXPECT_EQ(c.first_difference, 5) << c.detail;
  std::vector<float> lp = logprobs;
  lp[9] = std::nextafter(lp[9], 0.0f);  // one ulp
  c = verify(tokens, lp);
  EXPECT_EQ(c.outcome, ReceiptCheck::Outcome::kOtherOutput);
  EXPECT_EQ(c.first_difference, 9) << c.detail;
  c = verify(std::vector<int32_t>(tokens.begin(), tokens.end() - 2),
             std::vector<float>(logprobs.begin(), logprobs.end() - 2));
  EXPECT_EQ(c.outcome, ReceiptCheck::Outcome::kOtherOutput);
  EXPECT_EQ(c.first_difference, 22) << c.detail;
  ReceiptSetup other = setup;
  other.schedule_version += 1;
  c = verify(tokens, logprobs, other);
  EXPECT_EQ(c.outcome, ReceiptCheck::Outcome::kOtherSchedule);
  EXPECT_NE(c.detail.find("fixed-schedule version"), std::string::npos) << c.detail;
}

// An output cut short by the session's limit on positions (its context length, or a KV cache
// smaller than it) ends by length before max_tokens; the receipt records the limit and the
// replay in a roomier session stops at the same place. The control: the same receipt with the
// limit removed (digest re-made) replays further and is not reproduced, so the limit is what
// makes the difference. A session too small for the receipt's sequence says so. Checked to fail
// with ReplayOptions leaving the receipt's max_sequence out (the replay goes on past the end).
TEST_F(ReceiptTest, AReceiptKeepsTheLimitThatEndedItsOutput) {
  RequestOptions spec = Spec(true);
  spec.max_tokens = 200;
  struct Limit {
    int32_t context;
    int64_t kv_tokens;
    int64_t positions;  // where the output must stop
  };
  for (const Limit limit : {Limit{64, 0, 64}, Limit{256, 48, 48}}) {
    std::string receipt;
    {
      auto small = Open(model_, "auto", 2, DeterminismMode::kSelective, limit.context, limit.kv_tokens);
      receipt = ReceiptOf(*small, spec);
    }
    auto parsed = ParseReceipt(receipt);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(parsed->prompt_tokens_size() + parsed->output_tokens_size(), limit.positions);
    EXPECT_EQ(parsed->finish_reason(), RECEIPT_FINISH_LENGTH);
    EXPECT_EQ(parsed->sampling().max_sequence(), limit.positions);
    auto roomy = Open(model_, "auto", 2, DeterminismMode::kSelective, 512);
    auto c = roomy->VerifyReceipt(receipt);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->outcome, ReceiptCheck::Outcome::kReproduced) << "limit " << limit.positions << ": " << c->detail;
    auto any = roomy->Submit(Spec(false), nullptr);
    ASSERT_TRUE(any.ok());
    (*any)->Wait(-1);
    ReceiptSetup setup = (*any)->receipts()->Setup();
    setup.max_sequence = 0;  // as a receipt made before the limit was recorded
    const std::string remade = MakeReceipt(
        setup, {parsed->prompt_tokens().begin(), parsed->prompt_tokens().end()}, spec, 1234,
        {parsed->output_tokens().begin(), parsed->output_tokens().end()},
        {parsed->logprobs().begin(), parsed->logprobs().end()}, FinishReason::kLength);
    c = roomy->VerifyReceipt(remade);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->outcome, ReceiptCheck::Outcome::kOtherOutput) << "the control replayed as far as the limit";
    EXPECT_EQ(c->first_difference, limit.positions - parsed->prompt_tokens_size()) << c->detail;
  }
  // A session whose context cannot hold the receipt's sequence refuses to replay it, by name.
  std::string receipt;
  {
    auto s = Open(model_, "auto", 2, DeterminismMode::kSelective, 64);
    receipt = ReceiptOf(*s, spec);
  }
  auto tight = Open(model_, "auto", 2, DeterminismMode::kSelective, 40);
  const auto refused = tight->VerifyReceipt(receipt);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(refused.status().message().find("at least 64"), std::string::npos) << refused.status();
}

TEST_F(ReceiptTest, AnotherModelAndAnotherScheduleAreTheirOwnOutcomes) {
  const std::string other_model = testing::TinyModelPath(GgmlType::kF32);
  if (other_model.empty()) GTEST_SKIP() << "../shared/vocab/ggml-vocab-llama-spm.gguf is missing";
  auto s = Open(model_);
  const std::string receipt = ReceiptOf(*s, Spec(true));
  auto elsewhere = Open(other_model);
  auto c = elsewhere->VerifyReceipt(receipt);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->outcome, ReceiptCheck::Outcome::kOtherModel) << c->detail;
  auto f16 = Open(model_, "f16");
  c = f16->VerifyReceipt(receipt);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->outcome, ReceiptCheck::Outcome::kOtherSchedule) << c->detail;
  EXPECT_NE(c->detail.find("KV type"), std::string::npos) << c->detail;
}

// A tokenizer-only session fingerprints its file (the same hash) and refuses to replay.
TEST_F(ReceiptTest, TokenizerOnlySessionsFingerprintButDoNotReplay) {
  auto full = Open(model_);
  const std::string receipt = ReceiptOf(*full, Spec(true));
  SessionOptions o;
  o.model_path = model_;
  o.vocab_only = true;
  auto vocab = Session::Create(o);
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  EXPECT_EQ((*vocab)->Fingerprint().sha256, full->Fingerprint().sha256);
  EXPECT_EQ((*vocab)->VerifyReceipt(receipt).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(ReceiptTest, OnlyFinishedDeterministicRequestsGetReceipts) {
  auto s = Open(model_);
  auto plain = s->Submit(Spec(false), nullptr);
  ASSERT_TRUE(plain.ok());
  (*plain)->Wait(-1);
  EXPECT_EQ((*plain)->receipts()->Make(**plain).status().code(), absl::StatusCode::kFailedPrecondition);
  RequestOptions long_one = Spec(true);
  long_one.max_tokens = 200;
  auto cancelled = s->Submit(long_one, nullptr);
  ASSERT_TRUE(cancelled.ok());
  (*cancelled)->Cancel();
  (*cancelled)->Wait(-1);
  EXPECT_EQ((*cancelled)->receipts()->Make(**cancelled).status().code(), absl::StatusCode::kFailedPrecondition);
  // A batch_invariant session's requests are all deterministic.
  SessionOptions o;
  o.model_path = model_;
  o.threads = 2;
  o.context_length = 256;
  o.determinism.mode = DeterminismMode::kBatchInvariant;
  auto fixed = Session::Create(o);
  ASSERT_TRUE(fixed.ok());
  auto r = (*fixed)->Submit(Spec(false), nullptr);
  ASSERT_TRUE(r.ok());
  (*r)->Wait(-1);
  auto receipt = (*r)->receipts()->Make(**r);
  ASSERT_TRUE(receipt.ok()) << receipt.status();
  // Replayed in a selective session as a deterministic request: the same bits.
  auto selective = Open(model_);
  auto c = selective->VerifyReceipt(*receipt);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->outcome, ReceiptCheck::Outcome::kReproduced) << c->detail;
}

// The fingerprint reads every byte: one changed weight byte or metadata value changes it; the
// thread count does not.
TEST_F(ReceiptTest, FingerprintSeesEveryByteAndNoThreadCount) {
  auto file = GgufFile::Open(model_);
  ASSERT_TRUE(file.ok()) << file.status();
  const ModelFingerprintValue one = FingerprintModel(**file, 1), four = FingerprintModel(**file, 4);
  EXPECT_EQ(one.sha256, four.sha256);
  EXPECT_EQ(one.tensors, static_cast<int32_t>((*file)->tensors().size()));
  // A copy with one byte of the largest tensor changed (found in the file by its last 64 bytes).
  const GgufTensorInfo* big = &(*file)->tensors().front();
  for (const GgufTensorInfo& t : (*file)->tensors()) {
    if (t.n_bytes > big->n_bytes) big = &t;
  }
  std::string bytes;
  {
    std::ifstream in(model_, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const std::string tail(reinterpret_cast<const char*>(big->data + big->n_bytes - 64), 64);
  const size_t at = bytes.rfind(tail);
  ASSERT_NE(at, std::string::npos);
  const std::string path = testing::TempPath("fingerprint-one-byte.gguf");
  {
    std::string changed = bytes;
    changed[at + 10] ^= 1;
    std::ofstream(path, std::ios::binary) << changed;
  }
  auto changed = GgufFile::Open(path);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_NE(FingerprintModel(**changed, 2).sha256, one.sha256);
  // A receipt checked against the file with one changed weight: another model, said as such.
  {
    auto s = Open(model_);
    const std::string receipt = ReceiptOf(*s, Spec(true));
    auto other = Open(path);
    auto c = other->VerifyReceipt(receipt);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->outcome, ReceiptCheck::Outcome::kOtherModel) << c->detail;
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace llm42
