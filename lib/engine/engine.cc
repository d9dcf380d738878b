#include "lib/engine/engine.h"

#include <algorithm>
#include <chrono>
#include <numbers>
#include <optional>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "lib/grammar/token_grammar.h"
#include "lib/kv/kv_cache.h"
#include "lib/sampling/logit_controls.h"
#include "lib/sampling/philox.h"
#include "lib/sampling/sampler.h"
#include "lib/tokenizer/tokenizer.h"
#include "lib/util/logging.h"
#include "lib/util/portable_math.h"

namespace llm42 {
namespace {

// Adds N(0, stddev) noise to fast-path logits (the fast_path_noise testing hook), keyed by
// `key` (EngineConfig::noise_salt, the request) and the position.
void AddNoise(std::span<float> logits, double stddev, uint64_t key, int64_t position) {
  for (size_t i = 0; i < logits.size(); i += 2) {
    const double u1 = std::max(PhiloxUniform(key, static_cast<uint64_t>(position), static_cast<uint32_t>(i)), 1e-300);
    const double u2 = PhiloxUniform(key ^ 0x5bd1e995, static_cast<uint64_t>(position), static_cast<uint32_t>(i));
    const double r = std::sqrt(-2.0 * PortableLog(u1)) * stddev;
    double sin_t, cos_t;
    PortableSinCos(2 * std::numbers::pi * u2, &sin_t, &cos_t);
    logits[i] += static_cast<float>(r * cos_t);
    if (i + 1 < logits.size()) logits[i + 1] += static_cast<float>(r * sin_t);
  }
}

}  // namespace

Engine::Engine(const EngineConfig& config, const Tokenizer& tokenizer, KvCache& cache,
               ForwardFn forward, EngineStats& stats)
    : config_(config),
      tokenizer_(tokenizer),
      cache_(cache),
      forward_(std::move(forward)),
      stats_(stats),
      scheduler_(config.limits, cache, stats),
      dvr_(config.determinism, stats) {}

FinishReason Engine::EndsRequest(const Sequence& s, int32_t token, int64_t length,
                                 int64_t generated, bool stop_string) const {
  const RequestOptions& o = s.request->options();
  if (stop_string || (tokenizer_.vocab().IsEndOfGeneration(token) && !o.ignore_eos) ||
      CompletesGrammar(s, length - 1, token)) {
    return FinishReason::kStop;
  }
  if (generated >= o.max_tokens || length >= o.SequenceLimit(config_.max_sequence)) return FinishReason::kLength;
  return FinishReason::kNone;
}

bool Engine::CommitTokens(Sequence& s, std::span<const int32_t> tokens,
                          std::span<const float> logprobs, std::span<const TopLogprob> top) {
  std::string released;
  FinishReason reason = FinishReason::kNone;
  size_t n = 0;
  // Committed tokens take the places of the first candidates; candidates survive only while
  // they agree, and then the probe (committed text plus candidates) is still right.
  bool kept_candidates = true;
  while (n < tokens.size() && reason == FinishReason::kNone) {
    const int32_t token = tokens[n++];
    const auto at = static_cast<size_t>(s.n_committed);
    if (at == s.tokens.size() || s.tokens[at] != token) {
      s.tokens.resize(at);
      s.tokens.push_back(token);
      kept_candidates = false;
    }
    ++s.n_committed;
    const bool stop_string = s.text.Push(tokenizer_.TokenBytes(token), &released);
    reason = EndsRequest(s, token, s.n_committed, s.generated(), stop_string);
    if (reason == FinishReason::kLength || (reason == FinishReason::kStop && !stop_string)) {
      s.text.Finish(&released);
    }
  }
  if (s.dvr && !kept_candidates) s.probe = s.text;
  stats_.Add(Stat::kTokensGenerated, static_cast<int64_t>(n));
  const bool done = reason != FinishReason::kNone;
  if (done) {
    // Before the request is seen finished: its blocks are back in the pool and it is counted.
    scheduler_.Release(s);
    stats_.Add(Stat::kRequestsFinished);
  }
  const auto top_n = static_cast<size_t>(s.request->options().top_logprobs);
  s.request->Commit(tokens.first(n), logprobs.empty() ? logprobs : logprobs.first(n),
                    top.empty() ? top : top.first(std::min(top.size(), n * top_n)), released, done, reason,
                    absl::OkStatus());
  return done;
}

void Engine::Finish(Sequence& s, FinishReason reason, absl::Status status) {
  std::string rest;
  s.text.Finish(&rest);
  stats_.Add(Stat::kRequestsFinished);
  s.request->Commit({}, {}, {}, rest, true, reason, std::move(status));
}

void Engine::Fail(Sequence& s, absl::Status status) {
  scheduler_.Release(s);
  Finish(s, FinishReason::kError, std::move(status));
}

bool Engine::ControlsLogits(const Sequence& s) {
  return s.grammar != nullptr || s.request->options().controls.active();
}

bool Engine::ControlLogits(Sequence& s, int64_t position, std::span<float> logits) {
  if (!ControlsLogits(s)) return true;
  const auto start = std::chrono::steady_clock::now();
  const RequestOptions& o = s.request->options();
  if (o.controls.active()) {
    ApplyLogitControls(o.controls, std::span<const int32_t>(s.tokens).first(static_cast<size_t>(position)), logits);
  }
  bool any = true;
  if (s.grammar != nullptr) {
    const GrammarState* state = s.grammar->After(s.OutputBefore(position));
    any = state != nullptr && s.grammar->grammar().MaskLogits(*state, !o.ignore_eos, logits);
  }
  stats_.AddControlledRow(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return any;
}

bool Engine::CompletesGrammar(const Sequence& s, int64_t position, int32_t token) {
  if (s.grammar == nullptr) return false;
  const GrammarState* after = s.grammar->After(s.OutputBefore(position), token);
  return after != nullptr && s.grammar->grammar().automaton().IsComplete(*after);
}

namespace {

absl::Status NoTokenAllowed(const Sequence& s, int64_t position) {
  return absl::FailedPreconditionError(absl::StrCat("the output grammar allows no token of the model's vocabulary after ",
                                                    position - s.n_prompt, " output tokens"));
}

}  // namespace

void Engine::FinishAll(FinishReason reason, const absl::Status& status) {
  for (auto& s : scheduler_.TakeAll()) Finish(*s, reason, status);
}

Schedule Engine::EntrySchedule(const PlanEntry& p, DvrController::DecodeChoice choice) const {
  using Choice = DvrController::DecodeChoice;
  if (!p.seq->dvr) {
    return choice == Choice::kAllFixed && p.kind == RowKind::kDecode ? Schedule::kFixed : config_.schedule;
  }
  if (p.kind != RowKind::kDecode) return Schedule::kFixed;  // verify and prefill
  return choice != Choice::kCandidates && p.seq->candidates() == 0 ? Schedule::kFixed : Schedule::kFast;
}

bool Engine::VerifyEntry(Sequence& s, int64_t n, const std::function<std::span<float>(int64_t)>& rows) {
  const RequestOptions& o = s.request->options();
  // A row where the grammar allows nothing can only be the one after the last candidate (each
  // candidate was drawn where it allowed something): its token is not committed.
  int64_t dead = -1;
  DvrController::Verdict v = dvr_.Verify(s, n, o.logprobs, o.top_logprobs, [&](int64_t j) -> std::span<const float> {
    const std::span<float> logits = rows(j);
    if (!ControlLogits(s, s.n_committed + j, logits) && dead < 0) dead = j;
    return logits;
  });
  dvr_.Count(s, v);
  const bool dead_end = dead >= 0 && static_cast<size_t>(dead) < v.tokens.size();
  if (dead_end) {
    const auto keep = static_cast<size_t>(dead);
    v.tokens.resize(keep);
    if (!v.logprobs.empty()) v.logprobs.resize(keep);
    v.top.resize(std::min(v.top.size(), keep * static_cast<size_t>(o.top_logprobs)));
  }
  const int64_t before = s.n_committed;
  const bool done = CommitTokens(s, v.tokens, v.logprobs, v.top);
  if (dead_end && !done) {
    Fail(s, NoTokenAllowed(s, s.n_committed));
    return true;
  }
  // The token after a window that agreed came from the replay's last row: decoded under fixed.
  if (!v.disagreed && s.n_committed - before > v.verified) stats_.Add(Stat::kTokensDecodedFixed);
  if (done) return true;
  dvr_.Settle(s, v, cache_);
  return false;
}

bool Engine::Step() {
  const auto step_start = std::chrono::steady_clock::now();
  // Cancellations first: they free cache for everyone else.
  for (auto& s : scheduler_.TakeCancelled()) {
    Finish(*s, FinishReason::kCancelled, absl::CancelledError("cancelled"));
  }
  scheduler_.Admit();
  const std::vector<PlanEntry> plan = scheduler_.Plan();
  if (plan.empty()) return false;

  // Each entry's schedule (EntrySchedule). Whether deterministic requests decode under fixed
  // this step, and the plain decode rows with them, is the DVR controller's choice, from the
  // shape of the step's other rows.
  StepShape rest;
  int64_t deterministic_decodes = 0, clean_decodes = 0, plain_decodes = 0, replay_rows = 0;
  using Choice = DvrController::DecodeChoice;
  for (const PlanEntry& p : plan) {
    rest.attended += p.n * p.begin + p.n * (p.n + 1) / 2;
    if (p.kind == RowKind::kVerify) replay_rows += p.n;
    if (p.seq->dvr && p.kind == RowKind::kDecode) {
      ++deterministic_decodes;
      clean_decodes += p.seq->candidates() == 0;
    } else {
      const Schedule sched = EntrySchedule(p, Choice::kCandidates);
      (sched == Schedule::kFixed ? rest.fixed_rows : rest.fast_rows) += p.n;
      plain_decodes += p.kind == RowKind::kDecode && sched == Schedule::kFast;
    }
  }
  const int64_t verify_rows =
      std::min<int64_t>(int64_t{config_.determinism.window} * config_.determinism.verify_group,
                        config_.limits.max_batch_tokens - rest.fast_rows - deterministic_decodes);
  const Choice choice = deterministic_decodes > 0 ? dvr_.ChooseDecode(deterministic_decodes, clean_decodes, rest,
                                                                     plain_decodes, verify_rows)
                                                  : Choice::kCandidates;
  std::vector<Schedule> entry_schedule(plan.size());
  for (size_t e = 0; e < plan.size(); ++e) entry_schedule[e] = EntrySchedule(plan[e], choice);

  // Rows: a verify entry wants every row's logits; the others the last row's when it
  // completes the sequence — only its ArgmaxSummary when a greedy draw without logprobs is all
  // it feeds (on a GPU the row's logits then stay on the device).
  std::vector<int32_t> tokens, positions, seqs, logit_rows;
  std::vector<uint8_t> argmax_only;  // per logit row
  auto want_logits = [&](size_t row, bool summary_only) {
    logit_rows.push_back(static_cast<int32_t>(row));
    argmax_only.push_back(summary_only);
  };
  std::vector<Schedule> schedules;
  std::vector<size_t> first_logit(plan.size()), score_first(plan.size()), score_n(plan.size());
  StepShape shape{0, 0, rest.attended};
  for (size_t e = 0; e < plan.size(); ++e) {
    const PlanEntry& p = plan[e];
    Sequence& s = *p.seq;
    const Schedule sched = entry_schedule[e];
    (sched == Schedule::kFixed ? shape.fixed_rows : shape.fast_rows) += p.n;
    if (s.dvr && p.kind == RowKind::kPrefill) {
      stats_.Check(s.fixed_prefill(), "a deterministic prefill runs only over the committed prefix");
    }
    // Prompt rows that score the next prompt token (RequestOptions::prompt_logprobs) come first.
    score_first[e] = logit_rows.size();
    const bool scoring = p.kind != RowKind::kVerify && s.request->options().prompt_logprobs;
    for (int64_t j = 0; j < p.n && scoring; ++j) {
      const int64_t pos = p.begin + j;
      if (pos == s.prompt_scored + static_cast<int64_t>(score_n[e]) && pos + 1 < s.n_prompt) {
        want_logits(tokens.size() + static_cast<size_t>(j), false);
        ++score_n[e];
      }
    }
    first_logit[e] = logit_rows.size();
    for (int64_t j = 0; j < p.n; ++j) {
      tokens.push_back(s.tokens[static_cast<size_t>(p.begin + j)]);
      positions.push_back(static_cast<int32_t>(p.begin + j));
      seqs.push_back(s.kv_seq);
      schedules.push_back(sched);
      if (p.kind == RowKind::kVerify) want_logits(tokens.size() - 1, false);
    }
    if (p.kind != RowKind::kVerify && p.begin + p.n == static_cast<int64_t>(s.tokens.size())) {
      const RequestOptions& o = s.request->options();
      want_logits(tokens.size() - 1, IsGreedy(s.sampling) && !o.logprobs && o.top_logprobs == 0 &&
                                         config_.determinism.fast_path_noise == 0 && !ControlsLogits(s));
    }
  }
  // Where each logit row's logits land on the host: packed, the summarized rows skipped (-1).
  std::vector<int64_t> slot(logit_rows.size(), -1);
  int64_t n_full = 0;
  for (size_t r = 0; r < slot.size(); ++r) {
    if (!argmax_only[r]) slot[r] = n_full++;
  }
  const auto n_vocab = static_cast<size_t>(tokenizer_.vocab().size());
  argmax_.resize(logit_rows.size());
  const auto start = std::chrono::steady_clock::now();
  double logits_s = 0;
  absl::StatusOr<float*> logits = forward_(ForwardBatch{tokens, positions, seqs, logit_rows, config_.schedule,
                                                        schedules, argmax_only, argmax_.data(), &logits_s});
  if (!logits.ok()) {
    Log(LogLevel::kError, "forward pass failed: ", logits.status().message());
    FinishAll(FinishReason::kError, logits.status());
    return true;
  }
  const double pass_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  dvr_.ObserveStep(shape, replay_rows, pass_s);
  // What each row wrote into the cache, for the prefix cache: a deterministic request's rows
  // under fast are candidates, which a rollback may rewrite.
  for (size_t e = 0; e < plan.size(); ++e) {
    const PlanEntry& p = plan[e];
    const bool fixed = entry_schedule[e] == Schedule::kFixed;
    for (int64_t j = 0; j < p.n; ++j) {
      const int64_t pos = p.begin + j;
      cache_.NoteWritten(p.seq->kv_seq, pos, p.seq->tokens[static_cast<size_t>(pos)], fixed, p.seq->dvr && !fixed);
    }
  }
  stats_.Add(Stat::kDecodeSteps);

  std::vector<Sequence*> finished;
  const double noise = config_.determinism.fast_path_noise;
  // A logit row's logits (empty for a summarized row: its draw reads argmax_[r]).
  auto row = [&](size_t r) {
    return slot[r] < 0 ? std::span<float>()
                       : std::span<float>(*logits + static_cast<size_t>(slot[r]) * n_vocab, n_vocab);
  };
  // An entry's next token (with the draw's margin for a candidate), after the fast path's
  // noise where configured: a pure function of its row, the request's sampling and the
  // position, so with EngineConfig::parallel_for the draws of entries that end their
  // sequence's rows this step run on host threads first (a draw at T > 0 over a 128K
  // vocabulary takes milliseconds), and the commits below stay in plan order. Only an entry
  // that is its sequence's first in the plan draws ahead: an earlier entry (a verify) may change
  // the sequence before the loop reaches it.
  std::vector<std::optional<SampledToken>> draws(plan.size());
  auto draw = [&](size_t e) {
    const PlanEntry& p = plan[e];
    Sequence& s = *p.seq;
    const bool fast_row = entry_schedule[e] == Schedule::kFast;
    if (argmax_only[first_logit[e]]) {  // greedy: what SampleWithMargin / SampleToken would return
      const ArgmaxSummary& a = argmax_[first_logit[e]];
      draws[e] = s.dvr && fast_row ? GreedyDraw(a, n_vocab) : SampledToken{a.id, 0.0};
      return;
    }
    const std::span<float> logits = row(first_logit[e]);
    const auto position = static_cast<int64_t>(s.tokens.size());
    if (fast_row && noise > 0) AddNoise(logits, noise, s.sampling.seed ^ s.arrival ^ config_.noise_salt, position);
    if (!ControlLogits(s, position, logits)) {
      draws[e] = SampledToken{-1, 0.0};  // the loop below fails the request
      return;
    }
    draws[e] = s.dvr && fast_row ? SampleWithMargin(logits, s.sampling, position)
                                 : SampledToken{SampleToken(logits, s.sampling, position), 0.0};
  };
  if (config_.parallel_for) {
    absl::flat_hash_set<const Sequence*> seen;
    std::vector<size_t> ahead;
    for (size_t e = 0; e < plan.size(); ++e) {
      const PlanEntry& p = plan[e];
      // (A summarized row's draw is a copy of its summary: not worth a thread.)
      if (seen.insert(p.seq).second && p.kind != RowKind::kVerify &&
          p.seq->n_computed + p.n == static_cast<int64_t>(p.seq->tokens.size()) && !argmax_only[first_logit[e]]) {
        ahead.push_back(e);
      }
    }
    if (ahead.size() > 1) {
      config_.parallel_for(static_cast<int64_t>(ahead.size()), [&](int64_t b, int64_t end) {
        for (int64_t i = b; i < end; ++i) draw(ahead[static_cast<size_t>(i)]);
      });
    }
  }
  for (size_t e = 0; e < plan.size(); ++e) {
    const PlanEntry& p = plan[e];
    Sequence& s = *p.seq;
    const RequestOptions& o = s.request->options();
    if (score_n[e] > 0) {
      std::vector<float> scores;
      for (size_t k = 0; k < score_n[e]; ++k) {
        const auto next = static_cast<size_t>(s.prompt_scored + static_cast<int64_t>(k) + 1);
        scores.push_back(TokenLogprob(row(score_first[e] + k), s.tokens[next]));
      }
      s.request->AddPromptLogprobs(scores);
      s.prompt_scored += static_cast<int64_t>(score_n[e]);
    }
    if (p.kind == RowKind::kVerify) {
      if (VerifyEntry(s, p.n, [&](int64_t j) {
            return row(first_logit[e] + static_cast<size_t>(j));
          })) {
        finished.push_back(&s);
      }
      continue;
    }
    const bool prefill = p.kind == RowKind::kPrefill || s.n_computed < s.n_prompt;
    const bool fast_row = entry_schedule[e] == Schedule::kFast;
    s.n_computed += p.n;
    if (prefill) {
      stats_.Count(*s.request, Stat::kPrefillTokens, p.n);
    } else {
      s.request->Count(Stat::kDecodeSteps);  // its decode rows (the session counts steps)
      // A deterministic request's row decoded under fixed: committed without verification.
      if (s.dvr && !fast_row) stats_.Count(*s.request, Stat::kTokensDecodedFixed);
    }
    if (s.n_computed != static_cast<int64_t>(s.tokens.size())) continue;  // mid-prompt chunk
    const std::span<float> logits = row(first_logit[e]);
    const auto position = static_cast<int64_t>(s.tokens.size());
    if (!draws[e].has_value()) draw(e);
    if (draws[e]->token < 0) {
      Fail(s, NoTokenAllowed(s, position));
      finished.push_back(&s);
      continue;
    }
    if (s.dvr && fast_row) {
      // A candidate: held until verified. Only candidates need the draw's margin.
      const SampledToken sampled = *draws[e];
      std::string ignored;
      const bool stop_string = s.probe.Push(tokenizer_.TokenBytes(sampled.token), &ignored);
      const bool ends = EndsRequest(s, sampled.token, position + 1, s.generated() + s.candidates() + 1,
                                    stop_string) != FinishReason::kNone;
      dvr_.AddCandidate(s, sampled.token, sampled.margin, ends);
      continue;
    }
    const int32_t token = draws[e]->token;
    float logprob = 0.0f;
    top_scratch_.clear();
    if (o.logprobs || o.top_logprobs > 0) {
      const LogSoftmax lp(logits);  // once for both
      logprob = lp(logits[static_cast<size_t>(token)]);
      if (o.top_logprobs > 0) AppendTopLogprobs(logits, o.top_logprobs, lp, &top_scratch_);
    }
    if (CommitTokens(s, std::span(&token, 1),
                     o.logprobs ? std::span<const float>(&logprob, 1) : std::span<const float>(), top_scratch_)) {
      finished.push_back(&s);
    }
  }
  for (Sequence* s : finished) scheduler_.Remove(s);
  const double step_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count();
  stats_.AddStepTimes(pass_s - logits_s, logits_s, step_s - pass_s);
  return true;
}

}  // namespace llm42
