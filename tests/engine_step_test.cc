// The engine's step loop driven by a fake forward pass (tests/fake_model.h): selective
// determinism's guarantees and its bookkeeping, without a model's cost.
#include "lib/engine/engine.h"

#include <cmath>
#include <functional>
#include <map>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "lib/grammar/grammar.h"
#include "lib/grammar/grammar_trace.h"
#include "lib/grammar/token_grammar.h"
#include "tests/fake_model.h"

namespace llm42 {
namespace {

using testing::FakeModel;

EngineConfig Config(int64_t batch_tokens, int32_t window, int32_t group) {
  EngineConfig c;
  c.limits = SchedulerLimits{batch_tokens, 32, group};
  c.determinism.window = window;
  c.determinism.verify_group = group;
  c.determinism.decode_path = DecodePath::kVerify;  // these tests are about verification
  c.max_sequence = 4096;
  return c;
}

std::vector<int32_t> Prompt(int length, int salt) {
  std::vector<int32_t> p = {1};
  for (int i = 1; i < length; ++i) p.push_back(3 + (i * 7 + salt * 13) % (FakeModel::kVocab - 3));
  return p;
}

void RunToEnd(Engine& e) {
  for (int i = 0; i < 100000 && !e.idle(); ++i) e.Step();
  ASSERT_TRUE(e.idle()) << "the engine did not drain";
}

// The output of `prompt` computed under fixed alone (what batch_invariant mode gives).
std::vector<int32_t> FixedAlone(const std::vector<int32_t>& prompt, int32_t max_tokens) {
  FakeModel m;
  EngineStats stats;
  EngineConfig c = Config(64, 8, 4);
  c.schedule = Schedule::kFixed;
  auto e = m.MakeEngine(c, stats);
  auto seq = FakeModel::MakeSequence(prompt, max_tokens, false, 0, 8);
  auto request = seq->request;
  e->Enqueue(std::move(seq));
  RunToEnd(*e);
  return request->output_tokens();
}

struct Mix {
  int64_t batch_tokens;
  int32_t window, group;
};

// Deterministic requests among plain ones give the fixed-alone output for every batch size,
// window and group, with real rollbacks, and no fixed row ever reads a fast-written K/V: the
// rollback truncates the cache per position. Break Settle's truncation (or let a verify row
// start past the last committed token) and fixed_rows_reading_fast_kv counts it.
TEST(EngineStep, DeterministicOutputIsFixedAloneWhateverTheMix) {
  std::map<int, std::vector<int32_t>> reference;
  for (int i = 0; i < 4; ++i) reference[i] = FixedAlone(Prompt(5 + 3 * i, i), 40 + 5 * i);
  for (const Mix& mix : {Mix{64, 8, 4}, Mix{6, 8, 4}, Mix{512, 64, 8}, Mix{16, 1, 1}, Mix{3, 4, 2}}) {
    FakeModel m;
    EngineStats stats;
    auto e = m.MakeEngine(Config(mix.batch_tokens, mix.window, mix.group), stats);
    std::vector<std::shared_ptr<Request>> det, plain;
    uint64_t arrival = 0;
    for (int i = 0; i < 4; ++i) {
      auto d = FakeModel::MakeSequence(Prompt(5 + 3 * i, i), 40 + 5 * i, true, arrival++, mix.window);
      det.push_back(d->request);
      e->Enqueue(std::move(d));
      auto p = FakeModel::MakeSequence(Prompt(4 + i, 50 + i), 30, false, arrival++, mix.window);
      plain.push_back(p->request);
      e->Enqueue(std::move(p));
      e->Step();
    }
    RunToEnd(*e);
    const std::string at = "batch " + std::to_string(mix.batch_tokens) + " W " + std::to_string(mix.window) +
                           " G " + std::to_string(mix.group);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(det[static_cast<size_t>(i)]->output_tokens(), reference[i]) << at;
    for (auto& p : plain) EXPECT_EQ(p->output_tokens().size(), 30u) << at;
    EXPECT_GT(stats.Get(Stat::kRollbacks), 0) << at << ": the fake fast path was meant to diverge";
    EXPECT_EQ(m.fixed_rows_reading_fast_kv(), 0) << at;
    EXPECT_EQ(stats.invariant_violations(), 0) << at;
    EXPECT_EQ(stats.Get(Stat::kRequestsFinished), 8) << at;
    EXPECT_EQ(m.cache().free_blocks(), m.cache().n_blocks()) << at;
  }
}

// Whichever path selective takes for a deterministic request (verify every window, decode
// under fixed, or the measured choice per step), the output is the fixed-alone one, and the
// stats say which path ran. Let a direct decode row run under fast (in Engine::Step's
// entry_schedule) and the kFixed and kAuto outputs differ from it.
TEST(EngineStep, EveryDecodePathCommitsTheFixedAloneOutput) {
  std::map<int, std::vector<int32_t>> reference;
  for (int i = 0; i < 3; ++i) reference[i] = FixedAlone(Prompt(5 + 3 * i, i), 40 + 5 * i);
  for (DecodePath path : {DecodePath::kVerify, DecodePath::kFixed, DecodePath::kAuto}) {
    FakeModel m;
    EngineStats stats;
    EngineConfig c = Config(64, 8, 4);
    c.determinism.decode_path = path;
    auto e = m.MakeEngine(c, stats);
    std::vector<std::shared_ptr<Request>> det;
    for (int i = 0; i < 3; ++i) {
      auto d = FakeModel::MakeSequence(Prompt(5 + 3 * i, i), 40 + 5 * i, true, 2 * i, 8);
      det.push_back(d->request);
      e->Enqueue(std::move(d));
      e->Enqueue(FakeModel::MakeSequence(Prompt(4 + i, 50 + i), 30, false, 2 * i + 1, 8));
      e->Step();
    }
    RunToEnd(*e);
    const std::string at = "path " + std::to_string(static_cast<int>(path));
    for (int i = 0; i < 3; ++i) EXPECT_EQ(det[static_cast<size_t>(i)]->output_tokens(), reference[i]) << at;
    if (path == DecodePath::kVerify) {
      // Under fixed only the token after a window that agreed, one per pass at most.
      EXPECT_GT(stats.Get(Stat::kVerifyPasses), 0) << at;
      EXPECT_LE(stats.Get(Stat::kTokensDecodedFixed), stats.Get(Stat::kVerifyPasses)) << at;
      EXPECT_GT(stats.Get(Stat::kTokensDecodedFixed), 0) << at;
    }
    if (path == DecodePath::kFixed) {
      EXPECT_EQ(stats.Get(Stat::kVerifyPasses), 0) << at;
      // Every token but the one the prefill commits.
      EXPECT_EQ(stats.Get(Stat::kTokensDecodedFixed), (40 - 1) + (45 - 1) + (50 - 1)) << at;
    }
    EXPECT_EQ(m.fixed_rows_reading_fast_kv(), 0) << at;
    EXPECT_EQ(stats.invariant_violations(), 0) << at;
  }
}

// Sensitivity control for the test above: plain requests (fast path, no verification) differ
// from their fixed-alone output.
TEST(EngineStep, ControlPlainRequestsDiverge) {
  FakeModel m;
  EngineStats stats;
  auto e = m.MakeEngine(Config(64, 8, 4), stats);
  auto p = FakeModel::MakeSequence(Prompt(5, 0), 40, false, 0, 8);
  auto r = p->request;
  e->Enqueue(std::move(p));
  RunToEnd(*e);
  EXPECT_NE(r->output_tokens(), FixedAlone(Prompt(5, 0), 40));
}

// A step's draws run on host threads (EngineConfig::parallel_for) before its commits; run in
// any order, one thread each, they give what drawing each entry in the plan-order loop gives
// (no parallel_for): sampled and greedy, deterministic and plain, with the fast path's noise.
// Let the loop draw an entry again after its draw ahead (drop `drawn[e] = 1` in Engine::Step:
// its noise is added twice) and this fails; tools/tsan.sh runs it for races between draws.
// Control: the same requests with other seeds do draw other tokens.
TEST(EngineStep, DrawsOnHostThreadsEqualDrawsInPlanOrder) {
  auto run = [](bool threads, uint64_t seed, int64_t* parallel_items) {
    FakeModel m;
    EngineStats stats;
    EngineConfig c = Config(64, 8, 4);
    c.determinism.fast_path_noise = 0.5;
    if (threads) {
      c.parallel_for = [parallel_items](int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
        *parallel_items += n;
        std::vector<std::thread> workers;
        for (int64_t i = n - 1; i >= 0; --i) workers.emplace_back([&fn, i] { fn(i, i + 1); });
        for (std::thread& t : workers) t.join();
      };
    }
    auto e = m.MakeEngine(c, stats);
    std::vector<std::shared_ptr<Request>> requests;
    for (int i = 0; i < 6; ++i) {
      auto q = FakeModel::MakeSequence(Prompt(4 + i, i), 30, i % 2 == 0, static_cast<uint64_t>(i), 8);
      if (i % 3 != 2) q->sampling = SamplingParams{1.5f, 0, 1.0f, 0.0f, seed + static_cast<uint64_t>(i)};
      requests.push_back(q->request);
      e->Enqueue(std::move(q));
    }
    RunToEnd(*e);
    std::vector<std::vector<int32_t>> out;
    for (auto& r : requests) out.push_back(r->output_tokens());
    return out;
  };
  int64_t parallel_items = 0;
  const auto serial = run(false, 7, nullptr);
  EXPECT_EQ(run(true, 7, &parallel_items), serial);
  EXPECT_GT(parallel_items, 0) << "no step drew on the host threads";
  EXPECT_NE(run(false, 8, nullptr), serial) << "control: other seeds should draw other tokens";
}

// What one request gives: its tokens, text and how it ended.
struct Outcome {
  std::vector<int32_t> tokens;
  std::string text;
  FinishReason reason;
  bool operator==(const Outcome& o) const { return tokens == o.tokens && text == o.text && reason == o.reason; }
};

// `o` alone under fixed (batch_invariant's output), or deterministic (dvr) or plain among three
// plain co-runners under selective with the given window and decode path.
Outcome RunEnding(const RequestOptions& o, int64_t eos_every, bool alone_fixed, bool dvr = true, int32_t window = 8,
                  DecodePath path = DecodePath::kVerify) {
  FakeModel m(256, 5, eos_every);
  EngineStats stats;
  EngineConfig c = Config(64, window, 4);
  c.determinism.decode_path = path;
  if (alone_fixed) c.schedule = Schedule::kFixed;
  auto e = m.MakeEngine(c, stats);
  auto seq = FakeModel::MakeSequence(o, dvr && !alone_fixed, 0, window);
  auto r = seq->request;
  e->Enqueue(std::move(seq));
  for (int i = 0; i < 3 && !alone_fixed; ++i) {
    e->Enqueue(FakeModel::MakeSequence(Prompt(4 + i, 60 + i), 25 + 7 * i, false, 1 + static_cast<uint64_t>(i), window));
  }
  RunToEnd(*e);
  EXPECT_EQ(m.fixed_rows_reading_fast_kv(), 0);
  EXPECT_EQ(stats.invariant_violations(), 0);
  return Outcome{r->output_tokens(), r->output_text(), r->finish_reason()};
}

// A deterministic request that ends at a candidate inside an unverified window — by a stop
// string, by EOS, by max_tokens — ends where, how and with the text batch_invariant's run
// does, with the fake fast path flipping tokens (EOS among them) so that candidates past and
// before the true end are rolled back; at windows of 8 and 64 (the end long before the window
// fills) and on every decode path. The control: the same request plain ends elsewhere or with
// other tokens for some ending, so the comparison can tell.
TEST(EngineStep, EndsInsideAnUnverifiedWindowAreBatchInvariants) {
  constexpr int64_t kEosEvery = 37;
  RequestOptions base;
  base.prompt_tokens = Prompt(6, 3);
  base.has_prompt_tokens = true;
  base.max_tokens = 120;
  std::vector<RequestOptions> endings;
  {
    RequestOptions eos = base;  // ends by EOS (checked below: before max_tokens)
    endings.push_back(eos);
    RequestOptions length = base;
    length.ignore_eos = true;
    length.max_tokens = 13;
    endings.push_back(length);
    // A stop string: two consecutive tokens of the fixed output, ten tokens in.
    RequestOptions probe = base;
    probe.ignore_eos = true;
    probe.max_tokens = 30;
    const Outcome free_run = RunEnding(probe, kEosEvery, true);
    RequestOptions stop = probe;
    stop.stops = {absl::StrCat("t", free_run.tokens[10], " t", free_run.tokens[11])};
    endings.push_back(stop);
  }
  int plain_differs = 0;
  for (size_t k = 0; k < endings.size(); ++k) {
    const Outcome ref = RunEnding(endings[k], kEosEvery, true);
    ASSERT_LT(ref.tokens.size(), 120u) << "ending " << k;
    EXPECT_EQ(ref.reason, k == 1 ? FinishReason::kLength : FinishReason::kStop) << "ending " << k;
    for (int32_t window : {8, 64}) {
      for (DecodePath path : {DecodePath::kVerify, DecodePath::kAuto}) {
        EXPECT_TRUE(RunEnding(endings[k], kEosEvery, false, true, window, path) == ref)
            << "ending " << k << ", window " << window << ", path " << static_cast<int>(path);
      }
    }
    plain_differs += !(RunEnding(endings[k], kEosEvery, false, false) == ref);
  }
  EXPECT_GT(plain_differs, 0) << "control: the fake fast path was meant to change some plain request's end";
}

// Greedy deterministic requests without logprobs bring back only an argmax summary for their
// fast rows and for their rows decoded under fixed (no logits cross from a device), and give the
// tokens of a run whose every row brought back its logits (with logprobs), on every decode path,
// beside plain co-runners, with the fake fast path diverging. Checked to fail when a summarized
// row's draw reads the next logit row's summary (tried); the control: the same requests plain
// give other tokens.
TEST(EngineStep, ArgmaxSummariesCommitTheFixedAloneTokens) {
  auto run = [](bool logprobs, bool dvr, DecodePath path, int64_t* summarized) {
    FakeModel m;
    EngineStats stats;
    EngineConfig c = Config(64, 8, 4);
    c.determinism.decode_path = path;
    if (logprobs && !dvr) c.schedule = Schedule::kFixed;  // the reference: batch_invariant
    auto e = m.MakeEngine(c, stats);
    std::vector<std::shared_ptr<Request>> det;
    for (int i = 0; i < 3; ++i) {
      RequestOptions o;
      o.prompt_tokens = Prompt(5 + 3 * i, i);
      o.has_prompt_tokens = true;
      o.max_tokens = 40;
      o.ignore_eos = true;
      o.logprobs = logprobs;
      auto d = FakeModel::MakeSequence(o, dvr, static_cast<uint64_t>(2 * i), 8);
      det.push_back(d->request);
      e->Enqueue(std::move(d));
      // (The reference, under fixed, needs no co-runners; theirs would be summarized.)
      if (c.schedule != Schedule::kFixed) {
        e->Enqueue(FakeModel::MakeSequence(Prompt(4 + i, 50 + i), 30, false, static_cast<uint64_t>(2 * i + 1), 8));
      }
      e->Step();
    }
    RunToEnd(*e);
    EXPECT_EQ(stats.invariant_violations(), 0);
    if (summarized != nullptr) *summarized = m.summarized_rows();
    std::vector<std::vector<int32_t>> out;
    for (auto& r : det) out.push_back(r->output_tokens());
    return out;
  };
  int64_t summarized = 0;
  const auto ref = run(true, false, DecodePath::kVerify, &summarized);
  EXPECT_EQ(summarized, 0) << "the reference was meant to bring back every row's logits";
  for (DecodePath path : {DecodePath::kVerify, DecodePath::kFixed, DecodePath::kAuto}) {
    EXPECT_EQ(run(false, true, path, &summarized), ref) << "path " << static_cast<int>(path);
    EXPECT_GT(summarized, 40) << "path " << static_cast<int>(path) << ": the summary path was meant to run";
  }
  EXPECT_NE(run(false, false, DecodePath::kVerify, nullptr), ref) << "control: plain requests were meant to diverge";
}

struct DrawnOutput {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<TopLogprob> top;
  bool operator==(const DrawnOutput&) const = default;
};

// What the backend did in a DrawnOutputs run.
struct BackendRows {
  int64_t drawn = 0, summarized = 0, controlled = 0;
};

// The grammar of the controlled requests: tokens t3 .. t19, any number, never an end.
std::unique_ptr<GrammarTrace> ThreeToNineteen(const Tokenizer& tokenizer) {
  absl::StatusOr<Grammar> g = ParseGbnf(R"(root ::= ("t" [3-9] " " | "t1" [0-9] " ")+)");
  EXPECT_TRUE(g.ok()) << g.status();
  std::vector<std::string> bytes;
  for (int32_t t = 0; t < FakeModel::kVocab; ++t) bytes.emplace_back(tokenizer.TokenBytes(t));
  auto tg = TokenGrammar::Create(*g, std::move(bytes), {2});
  EXPECT_TRUE(tg.ok()) << tg.status();
  return std::make_unique<GrammarTrace>(*std::move(tg));
}

// Six requests (four deterministic) run to their ends on the fake model with its fast path
// diverging, their draws made on the host from the logits or where the logits are
// (EngineConfig::device_draws: the fake backend applies controls and draws with
// logit_edit.h's and draw_rule.h's code, as a device does). With `controls`, the requests bias
// and penalize their logits and half of them follow a grammar, two of those greedy.
std::vector<DrawnOutput> DrawnOutputs(bool device, bool controls, uint64_t seed_base, BackendRows* rows) {
  FakeModel m;
  EngineStats stats;
  EngineConfig c = Config(64, 8, 4);
  c.determinism.decode_path = DecodePath::kVerify;  // a schedule that does not depend on step times
  c.device_draws = device;
  auto e = m.MakeEngine(c, stats);
  std::vector<std::shared_ptr<Request>> requests;
  for (int i = 0; i < 6; ++i) {
    RequestOptions o;
    o.prompt_tokens = Prompt(5 + 2 * i, i);
    o.has_prompt_tokens = true;
    o.max_tokens = 30;
    o.ignore_eos = true;
    o.logprobs = i % 2 == 0;
    o.top_logprobs = i % 3;
    SamplingParams sp;
    sp.temperature = 0.7f + 0.1f * static_cast<float>(i);
    sp.top_k = i == 4 ? 5 : 0;
    sp.top_p = i == 5 ? 0.9f : 1.0f;
    sp.seed = seed_base + static_cast<uint64_t>(i);
    if (controls) {
      if (i % 3 != 1) {
        o.controls.SetBias(7, 1.5f);
        o.controls.SetBias(9, -INFINITY);
        o.controls.SetBias(12, 0.8f);
      }
      if (i % 3 != 0) {
        o.controls.repetition_penalty = 1.4f;
        o.controls.frequency_penalty = 0.3f;
        o.controls.presence_penalty = 0.2f;
        o.controls.penalty_last_n = 16;
      }
      if (i == 2 || i == 3) {  // greedy, no logprobs: summarized where the logits are
        sp.temperature = 0.0f;
        o.logprobs = false;
        o.top_logprobs = 0;
      }
    }
    auto seq = FakeModel::MakeSequence(o, /*dvr=*/i < 4, static_cast<uint64_t>(i), 8, sp);
    if (controls && i % 2 == 0) seq->grammar = ThreeToNineteen(m.tokenizer());
    requests.push_back(seq->request);
    e->Enqueue(std::move(seq));
    e->Step();
  }
  RunToEnd(*e);
  EXPECT_EQ(stats.invariant_violations(), 0);
  if (rows != nullptr) *rows = BackendRows{m.device_drawn_rows(), m.summarized_rows(), m.controlled_rows()};
  std::vector<DrawnOutput> out;
  for (auto& r : requests) out.push_back(DrawnOutput{r->output_tokens(), r->logprobs(), r->top_logprobs()});
  return out;
}

// Sampled rows drawn where their logits are commit the tokens, logprobs and top logprobs of the
// host's draws from the logits, for deterministic requests (candidates and their verification)
// and plain ones alike. Checked to fail when a device-drawn row's draw is taken at the position
// after its own (tried); the control: seeds differ, so outputs do.
TEST(EngineStep, DeviceDrawsCommitTheHostDrawsBits) {
  BackendRows rows;
  const auto host = DrawnOutputs(false, false, 100, &rows);
  EXPECT_EQ(rows.drawn, 0);
  EXPECT_EQ(DrawnOutputs(true, false, 100, &rows), host);
  EXPECT_GT(rows.drawn, 100) << "the device draws were meant to run";
  for (const DrawnOutput& o : host) EXPECT_EQ(o.tokens.size(), 30u);
  EXPECT_NE(DrawnOutputs(true, false, 200, nullptr), host) << "control: other seeds were meant to draw other tokens";
}

// Logit bias, penalties and grammar masks applied where the logits are (ForwardBatch::controls)
// before a draw or a greedy summary there commit what the host commits applying them to the
// logits it brought back. Checked to fail when the engine hands the backend the history of the
// position before (tried), and when a controlled greedy row is summarized without its controls
// (tried). The grammar's tokens come out of both (checked against its definition), and the
// controls change outputs (control).
TEST(EngineStep, DeviceControlsCommitTheHostControlsBits) {
  BackendRows rows;
  const auto host = DrawnOutputs(false, true, 100, &rows);
  EXPECT_EQ(rows.controlled, 0);
  EXPECT_EQ(DrawnOutputs(true, true, 100, &rows), host);
  EXPECT_GT(rows.controlled, 100) << "the controls were meant to run where the logits are";
  EXPECT_GT(rows.summarized, 20) << "controlled greedy rows were meant to be summarized there";
  for (size_t i = 0; i < host.size(); i += 2) {
    for (int32_t t : host[i].tokens) EXPECT_TRUE(t >= 3 && t <= 19) << "request " << i << " left its grammar: " << t;
  }
  EXPECT_NE(DrawnOutputs(false, false, 100, nullptr), host) << "control: the controls were meant to change outputs";
}

struct StepLog {
  const EngineStats* stats;
  std::vector<int64_t> steps, verify_passes;
};

void RecordStep(void* user, void*, const int32_t*, size_t n, const char*, size_t, int32_t) {
  auto* log = static_cast<StepLog*>(user);
  for (size_t i = 0; i < n; ++i) {
    log->steps.push_back(log->stats->Get(Stat::kDecodeSteps));
    log->verify_passes.push_back(log->stats->Get(Stat::kVerifyPasses));
  }
}

// docs/determinism-tests.md item 10 under the default knobs (W 64, G 8, 512 batch tokens), where one
// verify group alone fills a step: the plain request gets a token in every step of its life
// while windows are being verified. With verification planned before decode rows (the old
// order; swap steps 1 and 2 of Scheduler::Plan) it skips steps and this fails.
TEST(EngineStep, PlainRequestDecodesEveryStepUnderDefaultKnobs) {
  FakeModel m(/*kv_blocks=*/2048, /*flip_every=*/0);  // no rollback: windows stay at 64
  EngineStats stats;
  auto e = m.MakeEngine(Config(512, 64, 8), stats);
  for (int i = 0; i < 16; ++i) e->Enqueue(FakeModel::MakeSequence(Prompt(6, i), 200, true, static_cast<uint64_t>(i), 64));
  for (int i = 0; i < 70; ++i) e->Step();  // every deterministic request holds a full window
  StepLog log{&stats, {}, {}};
  e->Enqueue(FakeModel::MakeSequence(Prompt(6, 99), 100, false, 16, 64, RecordStep, &log));
  RunToEnd(*e);
  ASSERT_EQ(log.steps.size(), 100u);
  for (size_t i = 1; i < log.steps.size(); ++i) {
    EXPECT_EQ(log.steps[i], log.steps[i - 1] + 1) << "token " << i << " skipped a step";
  }
  EXPECT_GT(log.verify_passes.back() - log.verify_passes.front(), 16)
      << "windows were verified while the plain request ran";
  EXPECT_EQ(m.fixed_rows_reading_fast_kv(), 0);
}

}  // namespace
}  // namespace llm42
