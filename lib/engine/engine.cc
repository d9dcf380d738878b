#include "lib/engine/engine.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <numbers>
#include <optional>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "lib/grammar/token_grammar.h"
#include "lib/engine/ngram_draft.h"
#include "lib/engine/row_controls.h"
#include "lib/engine/testing_hooks.h"
#include "lib/kv/kv_cache.h"
#include "lib/sampling/logit_controls.h"
#include "lib/numerics/philox.h"
#include "lib/sampling/sampler.h"
#include "lib/tokenizer/tokenizer.h"
#include "lib/util/logging.h"
#include "lib/numerics/portable_math.h"

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
  if (const int32_t fail_after = TestingHooks::FailRequestsAfterTokens().load(std::memory_order_relaxed);
      !done && fail_after > 0 && s.generated() >= fail_after) {
    Fail(s, absl::InternalError(absl::StrCat("injected failure after ", s.generated(), " tokens (llm42_testing.h)")));
    return true;
  }
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
  thread_local std::vector<LogitEdit> edits;  // Draw runs on host threads
  thread_local std::vector<uint64_t> allowed;
  const bool any = RowControls(s, position, n_vocab(), &edits, &allowed) == RowLeft::kTokens;
  ApplyEdits(edits.data(), static_cast<int64_t>(edits.size()), s.request->options().controls.penalty_rule(),
             logits.data());
  if (!allowed.empty()) ApplyAllowed(allowed.data(), static_cast<int64_t>(logits.size()), logits.data());
  stats_.AddControlledRow(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return any;
}

bool Engine::ControlOnDevice(const Sequence& s, int64_t position, size_t logit_row, StepBatch& b) {
  if (!ControlsLogits(s)) return true;
  const auto start = std::chrono::steady_clock::now();
  const bool any = RowControls(s, position, n_vocab(), &edits_scratch_, &allowed_scratch_) == RowLeft::kTokens;
  if (any) {
    b.controls.push_back(Backend::RowControl{static_cast<int32_t>(logit_row),
                                             s.request->options().controls.penalty_rule(), {}, {}});
    b.control_at.push_back({b.control_edits.size(), b.control_words.size()});
    b.control_edits.insert(b.control_edits.end(), edits_scratch_.begin(), edits_scratch_.end());
    b.control_words.insert(b.control_words.end(), allowed_scratch_.begin(), allowed_scratch_.end());
  }
  stats_.AddControlledRow(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return any;
}

RowDraw Engine::DrawOf(const Sequence& s, int64_t position) {
  return RowDraw{0, s.request->options().top_logprobs, static_cast<uint64_t>(position), s.sampling};
}

bool Engine::ReplayOnDevice(const Sequence& s, int64_t n, StepBatch& b) {
  const RequestOptions& o = s.request->options();
  if (!config_.device_draws || (IsGreedy(s.sampling) && (o.logprobs || o.top_logprobs > 0))) return false;
  const size_t controls = b.controls.size(), edits = b.control_edits.size(), words = b.control_words.size();
  for (int64_t j = 0; j < n; ++j) {
    if (!ControlOnDevice(s, s.n_committed + j, b.logit_rows.size() + static_cast<size_t>(j), b)) {
      // A row the grammar leaves nothing: the entry's logits come back, and the host finds it.
      b.controls.resize(controls);
      b.control_at.resize(controls);
      b.control_edits.resize(edits);
      b.control_words.resize(words);
      return false;
    }
  }
  return true;
}

bool Engine::CompletesGrammar(const Sequence& s, int64_t position, int32_t token) {
  if (s.grammar == nullptr) return false;
  const GrammarState* after = s.grammar->After(s.OutputBefore(position), token);
  return after != nullptr && s.grammar->grammar().automaton().IsComplete(*after);
}

int64_t Engine::n_vocab() const { return static_cast<int64_t>(tokenizer_.vocab().size()); }

void Engine::FailDeadEnd(Sequence& s, int64_t position) {
  Fail(s, NothingToDraw(s, position, RowControls(s, position, n_vocab(), &edits_scratch_, &allowed_scratch_)));
}

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

bool Engine::Step() {
  const auto step_start = std::chrono::steady_clock::now();
  // Cancellations first: they free cache for everyone else.
  for (auto& s : scheduler_.TakeCancelled()) {
    Finish(*s, FinishReason::kCancelled, absl::CancelledError("cancelled"));
  }
  scheduler_.Admit();
  ProposeDrafts();
  StepBatch b;
  b.plan = scheduler_.Plan();
  if (b.plan.empty()) return false;
  ChooseSchedules(b);
  BuildRows(b);
  if (!Run(b)) return true;
  DrawAhead(b);
  Commit(b);
  const double step_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count();
  stats_.AddStepTimes(b.pass_s - b.logits_s, b.logits_s, step_s - b.pass_s);
  return true;
}

void Engine::ChooseSchedules(StepBatch& b) {
  // Whether deterministic requests decode under fixed this step, and the plain decode rows with
  // them, is the DVR controller's choice, from the shape of the step's other rows.
  int64_t deterministic_decodes = 0, clean_decodes = 0, plain_decodes = 0;
  using Choice = DvrController::DecodeChoice;
  for (const PlanEntry& p : b.plan) {
    b.rest.attended += p.n * p.begin + p.n * (p.n + 1) / 2;
    if (p.kind == RowKind::kVerify) b.replay_rows += p.n;
    if (p.seq->dvr && p.kind == RowKind::kDecode) {
      ++deterministic_decodes;
      clean_decodes += p.seq->candidates() == 0;
    } else {
      const Schedule sched = EntrySchedule(p, Choice::kCandidates);
      (sched == Schedule::kFixed ? b.rest.fixed_rows : b.rest.fast_rows) += p.n;
      plain_decodes += p.kind == RowKind::kDecode && sched == Schedule::kFast;
    }
  }
  const int64_t verify_rows =
      std::min<int64_t>(int64_t{config_.determinism.window} * config_.determinism.verify_group,
                        config_.limits.max_batch_tokens - b.rest.fast_rows - deterministic_decodes);
  const Choice choice = deterministic_decodes > 0 ? dvr_.ChooseDecode(deterministic_decodes, clean_decodes, b.rest,
                                                                     plain_decodes, verify_rows)
                                                  : Choice::kCandidates;
  b.entry_schedule.resize(b.plan.size());
  for (size_t e = 0; e < b.plan.size(); ++e) b.entry_schedule[e] = EntrySchedule(b.plan[e], choice);
}

void Engine::BuildRows(StepBatch& b) {
  // A verify entry wants every row's logits; the others the last row's when it completes the
  // sequence — only its ArgmaxSummary when a greedy draw without logprobs is all it feeds (on a
  // GPU the row's logits then stay on the device).
  auto want_logits = [&](size_t row, bool summary_only, const RowDraw* device = nullptr) {
    b.logit_rows.push_back(static_cast<int32_t>(row));
    b.argmax_only.push_back(summary_only);
    b.device_draw.push_back(device != nullptr);
    b.row_draws.push_back(device != nullptr ? *device : RowDraw{});
  };
  const size_t n = b.plan.size();
  b.first_logit.resize(n);
  b.score_first.resize(n);
  b.score_n.resize(n);
  b.shape = StepShape{0, 0, b.rest.attended};
  b.first_scratch.assign(n, 0);
  int64_t scratch_used = 0;
  for (size_t e = 0; e < n; ++e) {
    if (config_.recurrent.on()) RecurrentRows(b, e, &scratch_used);
    const PlanEntry& p = b.plan[e];
    Sequence& s = *p.seq;
    const Schedule sched = b.entry_schedule[e];
    (sched == Schedule::kFixed ? b.shape.fixed_rows : b.shape.fast_rows) += p.n;
    if (s.dvr && p.kind == RowKind::kPrefill) {
      stats_.Check(s.fixed_prefill(), "a deterministic prefill runs only over the committed prefix");
    }
    // Prompt rows that score the next prompt token (RequestOptions::prompt_logprobs) come first.
    b.score_first[e] = b.logit_rows.size();
    const bool scoring = p.kind != RowKind::kVerify && s.request->options().prompt_logprobs;
    for (int64_t j = 0; j < p.n && scoring; ++j) {
      const int64_t pos = p.begin + j;
      if (pos == s.prompt_scored + static_cast<int64_t>(b.score_n[e]) && pos + 1 < s.n_prompt) {
        want_logits(b.tokens.size() + static_cast<size_t>(j), false);
        ++b.score_n[e];
      }
    }
    b.first_logit[e] = b.logit_rows.size();
    // A verify entry's rows come back as the replay's draws where the logits are, when they can.
    const bool replay_there = p.kind == RowKind::kVerify && ReplayOnDevice(s, p.n, b);
    for (int64_t j = 0; j < p.n; ++j) {
      b.tokens.push_back(s.tokens[static_cast<size_t>(p.begin + j)]);
      b.positions.push_back(static_cast<int32_t>(p.begin + j));
      b.seqs.push_back(s.kv_seq);
      b.schedules.push_back(sched);
      if (p.kind != RowKind::kVerify) continue;
      if (replay_there && !IsGreedy(s.sampling)) {
        const RowDraw d = DrawOf(s, s.n_committed + j);
        want_logits(b.tokens.size() - 1, false, &d);
      } else {
        want_logits(b.tokens.size() - 1, replay_there);
      }
    }
    if (p.kind != RowKind::kVerify && p.begin + p.n == static_cast<int64_t>(s.tokens.size())) {
      const RequestOptions& o = s.request->options();
      const bool greedy_summary = IsGreedy(s.sampling) && !o.logprobs && o.top_logprobs == 0;
      const auto position = static_cast<int64_t>(s.tokens.size());
      // Whether the row's draw can be made where its logits are: never under the fast path's
      // noise (the host adds it first); a row whose logits the request changes (bias, penalties,
      // grammar) only on a device that draws or summarizes it, which changes them there.
      const bool drawn_there = config_.device_draws && !IsGreedy(s.sampling);
      const bool there = config_.determinism.fast_path_noise == 0 &&
                         (!ControlsLogits(s) || ((drawn_there || (config_.device_draws && greedy_summary)) &&
                                                 ControlOnDevice(s, position, b.logit_rows.size(), b)));
      if (there && drawn_there) {
        const RowDraw d = DrawOf(s, position);
        want_logits(b.tokens.size() - 1, false, &d);
      } else {
        want_logits(b.tokens.size() - 1, there && greedy_summary);
      }
    }
  }
  // Where each logit row's logits land on the host: packed, the summarized and device-drawn rows
  // skipped (-1).
  b.slot.assign(b.logit_rows.size(), -1);
  int64_t n_full = 0;
  for (size_t r = 0; r < b.slot.size(); ++r) {
    if (!b.argmax_only[r] && !b.device_draw[r]) b.slot[r] = n_full++;
  }
  b.n_vocab = static_cast<size_t>(tokenizer_.vocab().size());
  b.draws.resize(n);
  for (size_t i = 0; i < b.controls.size(); ++i) {  // their storage is complete now
    const size_t edits_end = i + 1 < b.controls.size() ? b.control_at[i + 1].first : b.control_edits.size();
    const size_t words_end = i + 1 < b.controls.size() ? b.control_at[i + 1].second : b.control_words.size();
    b.controls[i].edits = std::span<const LogitEdit>(b.control_edits).subspan(b.control_at[i].first,
                                                                              edits_end - b.control_at[i].first);
    b.controls[i].allowed = std::span<const uint64_t>(b.control_words).subspan(b.control_at[i].second,
                                                                               words_end - b.control_at[i].second);
  }
}

void Engine::ProposeDrafts() {
  for (const std::unique_ptr<Sequence>& owned : scheduler_.running()) {
    Sequence& s = *owned;
    if (!s.dvr || s.request->options().draft != RequestOptions::Draft::kNgram || s.kv_seq < 0 || !s.decoding() ||
        s.candidates() > 0) {
      continue;
    }
    const std::vector<int32_t> draft = NgramDraft(s.tokens, s.window);
    // The verify rows feed the last committed token and the drafts: their positions reserved now
    // (no preemption for a draft: a request short of room decodes as it would have).
    if (draft.empty() || !cache_.Reserve(s.kv_seq, s.n_committed + static_cast<int64_t>(draft.size()))) continue;
    int64_t added = 0;
    for (int32_t token : draft) {
      const auto position = static_cast<int64_t>(s.tokens.size());
      // Never a token the grammar refuses (its replay row would find nothing to draw).
      if (s.grammar != nullptr && s.grammar->After(s.OutputBefore(position), token) == nullptr) break;
      std::string ignored;
      const bool stop_string = s.probe.Push(tokenizer_.TokenBytes(token), &ignored);
      const bool ends = EndsRequest(s, token, position + 1, s.generated() + s.candidates() + 1, stop_string) !=
                        FinishReason::kNone;
      dvr_.AddCandidate(s, token, std::numeric_limits<double>::infinity(), ends);
      ++added;
      if (s.ready) break;
    }
    if (added == 0) continue;
    s.drafted = added;
    if (!s.ready) dvr_.EndWindow(s);
    stats_.Count(*s.request, Stat::kDraftTokens, added);
  }
}

void Engine::RecurrentRows(StepBatch& b, size_t e, int64_t* scratch_used) {
  const PlanEntry& p = b.plan[e];
  Sequence& s = *p.seq;
  const RecurrentSlots& slots = config_.recurrent;
  stats_.Check(s.kv_seq < slots.sequences(), "a KV-cache sequence id has a recurrent state slot");
  // A deterministic request's decode row under fast: a candidate, on the candidates' copy.
  const bool candidate = s.dvr && p.kind == RowKind::kDecode && b.entry_schedule[e] == Schedule::kFast;
  RecurrentRow first{candidate ? slots.candidates(s.kv_seq) : slots.live(s.kv_seq)};
  if (s.fresh_state) {  // admitted: from its prefix's snapshot (KvCache::MapCachedPrefix), or zeros
    stats_.Check(!candidate, "a sequence's first row after admission is not a candidate");
    const int32_t id = cache_.SnapshotBefore(s.kv_seq, p.begin);
    stats_.Check(p.begin == 0 || id >= 0, "a sequence admitted past position 0 has its prefix's snapshot");
    first.from = p.begin == 0 || id < 0 ? RecurrentRow::kZeroState : slots.snapshot(id);
    s.fresh_state = false;
  } else if (p.begin == 0) {
    first.from = RecurrentRow::kZeroState;
  } else if (candidate && s.candidates() == 0) {
    first.from = slots.live(s.kv_seq);  // a window's first candidate
  }
  b.first_scratch[e] = *scratch_used;
  for (int64_t j = 0; j < p.n; ++j) {
    RecurrentRow row{first.slot, j == 0 ? first.from : RecurrentRow::kNone};
    if (p.kind == RowKind::kVerify && j + 1 < p.n) {
      stats_.Check(*scratch_used < slots.scratch_slots(), "a step's verify rows fit the recurrent scratch slots");
      row.snapshot = slots.scratch((*scratch_used)++);
    }
    // A row of the live state at its block's last position leaves the prefix cache its snapshot
    // (a verify row's through its scratch slot, copied after the pass).
    const int32_t id = candidate ? -1 : cache_.SnapshotAt(s.kv_seq, p.begin + j);
    if (id >= 0 && row.snapshot != RecurrentRow::kNone) {
      b.snapshot_copies.emplace_back(row.snapshot, slots.snapshot(id));
    } else if (id >= 0) {
      row.snapshot = slots.snapshot(id);
    }
    b.snapshotted.push_back(id >= 0);
    b.recurrent.push_back(row);
  }
}

bool Engine::SettleRecurrent(const StepBatch& b, size_t e, const Sequence& s) {
  // The pass fed positions begin.. begin + n - 1 and committed through n_committed - 1, so that
  // n_committed - 1 is the next to feed: the state wanted is after row n_committed - 2 - begin.
  const PlanEntry& p = b.plan[e];
  const int64_t kept = s.n_committed - 2 - p.begin;
  if (kept < 0 || kept >= p.n - 1) return true;  // the last row's: live holds it
  const absl::Status st = config_.copy_recurrent(config_.recurrent.scratch(b.first_scratch[e] + kept),
                                                 config_.recurrent.live(s.kv_seq));
  if (st.ok()) return true;
  Log(LogLevel::kError, "restoring a recurrent state failed: ", st.message());
  FinishAll(FinishReason::kError, st);
  return false;
}

bool Engine::Run(StepBatch& b) {
  argmax_.resize(b.logit_rows.size());
  drawn_.resize(b.logit_rows.size());
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<float*> logits =
      forward_(ForwardBatch{b.tokens, b.positions, b.seqs, b.logit_rows, config_.schedule, b.schedules, b.argmax_only,
                            argmax_.data(), b.device_draw, b.row_draws, drawn_.data(), b.controls, &b.logits_s,
                            b.recurrent});
  if (!logits.ok()) {
    Log(LogLevel::kError, "forward pass failed: ", logits.status().message());
    FinishAll(FinishReason::kError, logits.status());
    return false;
  }
  b.logits = *logits;
  b.pass_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  dvr_.ObserveStep(b.shape, b.replay_rows, b.pass_s);
  for (const auto& [from, to] : b.snapshot_copies) {
    if (const absl::Status st = config_.copy_recurrent(from, to); !st.ok()) {
      Log(LogLevel::kError, "keeping a recurrent state snapshot failed: ", st.message());
      FinishAll(FinishReason::kError, st);
      return false;
    }
  }
  // What each row wrote into the cache, for the prefix cache: a deterministic request's rows
  // under fast are candidates, which a rollback may rewrite.
  size_t row = 0;
  for (size_t e = 0; e < b.plan.size(); ++e) {
    const PlanEntry& p = b.plan[e];
    const bool fixed = b.entry_schedule[e] == Schedule::kFixed;
    for (int64_t j = 0; j < p.n; ++j, ++row) {
      const int64_t pos = p.begin + j;
      cache_.NoteWritten(p.seq->kv_seq, pos, p.seq->tokens[static_cast<size_t>(pos)], fixed, p.seq->dvr && !fixed,
                         !b.snapshotted.empty() && b.snapshotted[row]);
    }
  }
  stats_.Add(Stat::kDecodeSteps);
  return true;
}

// An entry's next token (with the draw's margin for a candidate), after the fast path's noise
// where configured: a pure function of its row, the request's sampling and the position, so the
// draws of entries that end their sequence's rows this step can run on host threads first
// (DrawAhead: a draw at T > 0 over a 128K vocabulary takes milliseconds), and the commits stay in
// plan order.
void Engine::Draw(StepBatch& b, size_t e) {
  const PlanEntry& p = b.plan[e];
  Sequence& s = *p.seq;
  const bool fast_row = b.entry_schedule[e] == Schedule::kFast;
  if (b.argmax_only[b.first_logit[e]]) {  // greedy: what SampleWithMargin / SampleToken would return
    const ArgmaxSummary& a = argmax_[b.first_logit[e]];
    b.draws[e] = s.dvr && fast_row ? GreedyDraw(a, b.n_vocab) : SampledToken{a.id, 0.0};
    return;
  }
  if (b.device_draw[b.first_logit[e]]) {  // drawn on the backend: SampleWithMargin's bits
    const SampledToken& d = drawn_[b.first_logit[e]].draw;
    b.draws[e] = s.dvr && fast_row ? d : SampledToken{d.token, 0.0};
    return;
  }
  const std::span<float> logits = b.Row(b.first_logit[e]);
  const auto position = static_cast<int64_t>(s.tokens.size());
  const double noise = config_.determinism.fast_path_noise;
  if (fast_row && noise > 0) AddNoise(logits, noise, s.sampling.seed ^ s.arrival ^ config_.noise_salt, position);
  if (!ControlLogits(s, position, logits)) {
    b.draws[e] = SampledToken{-1, 0.0};  // Commit fails the request
    return;
  }
  b.draws[e] = s.dvr && fast_row ? SampleWithMargin(logits, s.sampling, position)
                                 : SampledToken{SampleToken(logits, s.sampling, position), 0.0};
}

float Engine::Scores(const StepBatch& b, size_t r, int32_t token, const RequestOptions& o, std::vector<TopLogprob>* top) {
  top->clear();
  if (b.device_draw[r]) {  // the backend's LogSoftmax bits, of the token it drew
    const DrawnRow& d = drawn_[r];
    for (int32_t i = 0; i < d.top_n; ++i) top->push_back(TopLogprob{d.top_ids[i], d.top_logprobs[i]});
    return d.logprob;
  }
  if (!o.logprobs && o.top_logprobs == 0) return 0.0f;
  const std::span<float> logits = b.Row(r);
  const LogSoftmax lp(logits);  // once for both
  if (o.top_logprobs > 0) AppendTopLogprobs(logits, o.top_logprobs, lp, top);
  return lp(logits[static_cast<size_t>(token)]);
}

DvrController::ReplayDraw Engine::ReplayRow(StepBatch& b, size_t e, int64_t j) {
  Sequence& s = *b.plan[e].seq;
  const size_t r = b.first_logit[e] + static_cast<size_t>(j);
  const int64_t position = s.n_committed + j;
  DvrController::ReplayDraw d;
  if (b.argmax_only[r]) {  // greedy, no logprobs: the summary's token is SampleToken's
    d.token = argmax_[r].id;
    return d;
  }
  if (b.device_draw[r]) {
    d.token = drawn_[r].draw.token;
  } else {
    const std::span<float> logits = b.Row(r);
    if (!ControlLogits(s, position, logits)) {
      d.dead = true;
      return d;
    }
    d.token = SampleToken(logits, s.sampling, position);
  }
  d.logprob = Scores(b, r, d.token, s.request->options(), &replay_top_);
  d.top = replay_top_;
  return d;
}

void Engine::DrawAhead(StepBatch& b) {
  if (!config_.parallel_for) return;
  // Only an entry that is its sequence's first in the plan draws ahead: an earlier entry (a
  // verify) may change the sequence before Commit reaches it. A summarized or device-drawn row's
  // draw is a copy of what the backend returned: not worth a thread.
  absl::flat_hash_set<const Sequence*> seen;
  std::vector<size_t> ahead;
  for (size_t e = 0; e < b.plan.size(); ++e) {
    const PlanEntry& p = b.plan[e];
    if (seen.insert(p.seq).second && p.kind != RowKind::kVerify &&
        p.seq->n_computed + p.n == static_cast<int64_t>(p.seq->tokens.size()) && !b.argmax_only[b.first_logit[e]] &&
        !b.device_draw[b.first_logit[e]]) {
      ahead.push_back(e);
    }
  }
  if (ahead.size() > 1) {
    config_.parallel_for(static_cast<int64_t>(ahead.size()), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) Draw(b, ahead[static_cast<size_t>(i)]);
    });
  }
}

void Engine::Commit(StepBatch& b) {
  std::vector<Sequence*> finished;
  for (size_t e = 0; e < b.plan.size(); ++e) {
    const PlanEntry& p = b.plan[e];
    Sequence& s = *p.seq;
    const RequestOptions& o = s.request->options();
    if (b.score_n[e] > 0) {
      std::vector<float> scores;
      for (size_t k = 0; k < b.score_n[e]; ++k) {
        const auto next = static_cast<size_t>(s.prompt_scored + static_cast<int64_t>(k) + 1);
        scores.push_back(TokenLogprob(b.Row(b.score_first[e] + k), s.tokens[next]));
      }
      s.request->AddPromptLogprobs(scores);
      s.prompt_scored += static_cast<int64_t>(b.score_n[e]);
    }
    if (p.kind == RowKind::kVerify) {
      if (dvr_.VerifyAndCommit(s, p.n, [&](int64_t j) { return ReplayRow(b, e, j); }, *this, cache_)) {
        finished.push_back(&s);
      } else if (config_.recurrent.on() && !SettleRecurrent(b, e, s)) {
        return;
      }
      continue;
    }
    const bool prefill = p.kind == RowKind::kPrefill || s.n_computed < s.n_prompt;
    const bool fast_row = b.entry_schedule[e] == Schedule::kFast;
    s.n_computed += p.n;
    if (prefill) {
      stats_.Count(*s.request, Stat::kPrefillTokens, p.n);
    } else {
      s.request->Count(Stat::kDecodeSteps);  // its decode rows (the session counts steps)
      // A deterministic request's row decoded under fixed: committed without verification.
      if (s.dvr && !fast_row) stats_.Count(*s.request, Stat::kTokensDecodedFixed);
    }
    if (s.n_computed != static_cast<int64_t>(s.tokens.size())) continue;  // mid-prompt chunk
    const std::span<float> logits = b.Row(b.first_logit[e]);
    const auto position = static_cast<int64_t>(s.tokens.size());
    if (!b.draws[e].has_value()) Draw(b, e);
    if (b.draws[e]->token < 0) {
      if (s.dvr && fast_row && s.candidates() > 0) {
        // Nothing to draw after unverified candidates says nothing of the request: they may not
        // be what the replay draws. The window ends here and goes to verification, whose replay
        // decides (DvrController::VerifyAndCommit).
        dvr_.EndWindow(s);
        continue;
      }
      // After committed tokens alone: what every schedule finds here (row_controls.h).
      FailDeadEnd(s, position);
      finished.push_back(&s);
      continue;
    }
    if (s.dvr && fast_row) {
      // A candidate: held until verified. Only candidates need the draw's margin.
      const SampledToken sampled = *b.draws[e];
      std::string ignored;
      const bool stop_string = s.probe.Push(tokenizer_.TokenBytes(sampled.token), &ignored);
      const bool ends = EndsRequest(s, sampled.token, position + 1, s.generated() + s.candidates() + 1,
                                    stop_string) != FinishReason::kNone;
      dvr_.AddCandidate(s, sampled.token, sampled.margin, ends);
      continue;
    }
    const int32_t token = b.draws[e]->token;
    const float logprob = Scores(b, b.first_logit[e], token, o, &top_scratch_);
    if (CommitTokens(s, std::span(&token, 1),
                     o.logprobs ? std::span<const float>(&logprob, 1) : std::span<const float>(), top_scratch_)) {
      finished.push_back(&s);
    }
  }
  for (Sequence* s : finished) scheduler_.Remove(s);
}

}  // namespace llm42
