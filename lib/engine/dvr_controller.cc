#include "lib/engine/dvr_controller.h"

#include <algorithm>
#include <cmath>

#include "lib/kv/kv_cache.h"
#include "lib/numerics/philox.h"

namespace llm42 {

DvrController::DvrController(const DeterminismPolicy& policy, EngineStats& stats)
    : policy_(policy), stats_(stats) {}

void DvrController::AddCandidate(Sequence& s, int32_t token, double margin, bool ends) {
  s.tokens.push_back(token);
  stats_.Check(s.candidates() <= policy_.window, "a window holds at most W candidates");
  const bool close = policy_.early_verify && margin < kEarlyVerifyMargin;
  // Converging on decoding under fixed, requests still holding candidates verify them at once,
  // so that they decode under fixed after.
  s.ready = s.candidates() >= s.window || ends || close || converge_;
}

void DvrController::EndWindow(Sequence& s) {
  stats_.Check(s.candidates() > 0, "a window ends early only with candidates in it");
  s.ready = true;
}

bool DvrController::VerifyAndCommit(Sequence& s, int64_t n, const ReplayRows& rows, Committer& committer,
                                    KvCache& cache) {
  const RequestOptions& o = s.request->options();
  // A row with nothing to draw can only be the one after the last candidate (each candidate was
  // drawn where something was left): the candidates before it are committed, then the request
  // fails there.
  int64_t dead = -1;
  Verdict v = Verify(s, n, o.logprobs, o.top_logprobs, [&](int64_t j) {
    ReplayDraw d = rows(j);
    if (d.dead && dead < 0) dead = j;
    return d;
  });
  Count(s, v);
  const bool dead_end = dead >= 0 && static_cast<size_t>(dead) < v.tokens.size();
  if (dead_end) {
    const auto keep = static_cast<size_t>(dead);
    v.tokens.resize(keep);
    if (!v.logprobs.empty()) v.logprobs.resize(keep);
    v.top.resize(std::min(v.top.size(), keep * static_cast<size_t>(o.top_logprobs)));
  }
  const int64_t before = s.n_committed;
  const bool done = committer.CommitTokens(s, v.tokens, v.logprobs, v.top);
  if (dead_end && !done) {
    committer.FailDeadEnd(s, s.n_committed);
    return true;
  }
  // The token after a window that agreed came from the replay's last row: decoded under fixed.
  if (!v.disagreed && s.n_committed - before > v.verified) stats_.Add(Stat::kTokensDecodedFixed);
  if (done) return true;
  Settle(s, v, cache);
  return false;
}

DvrController::Verdict DvrController::Verify(const Sequence& s, int64_t n, bool logprobs, int top_n,
                                             const ReplayRows& row) {
  Verdict v;
  v.verified = std::min(n, s.candidates());
  const int64_t base = s.n_committed;
  for (int64_t j = 0; j < n; ++j) {
    const ReplayDraw d = row(j);
    const int32_t predicted = d.token;
    v.tokens.push_back(predicted);
    if (logprobs) v.logprobs.push_back(d.logprob);
    if (top_n > 0) v.top.insert(v.top.end(), d.top.begin(), d.top.end());
    if (j < v.verified && predicted != s.tokens[static_cast<size_t>(base + j)]) {
      v.disagreed = true;
      break;
    }
  }
  // Testing hook: force a rollback in a fraction of passes, at a position the replay agreed
  // with (the committed output must not change).
  const double inject = policy_.mismatch_injection;
  if (!v.disagreed && inject > 0 && v.verified > 1 &&
      PhiloxUniform(s.sampling.seed ^ s.arrival, static_cast<uint64_t>(base), 7) < inject) {
    const auto at = static_cast<size_t>(PhiloxUniform(s.sampling.seed, static_cast<uint64_t>(base), 8) *
                                        static_cast<double>(v.verified - 1));
    v.tokens.resize(at + 1);
    if (logprobs) v.logprobs.resize(at + 1);
    v.top.resize(std::min(v.top.size(), (at + 1) * static_cast<size_t>(top_n)));
    v.disagreed = true;
  }
  if (v.disagreed) {
    const auto last = static_cast<int64_t>(v.tokens.size()) - 1;
    const bool same = v.tokens.back() == s.tokens[static_cast<size_t>(base + last)];
    v.discarded = s.candidates() - last - (same ? 1 : 0);
  }
  return v;
}

void DvrController::ObserveStep(const StepShape& shape, int64_t replay_rows, double seconds) {
  cost_.Observe(shape, seconds);
  if (replay_rows == 0) return;
  constexpr double kDecay = 0.9;
  replay_rows_ = replay_rows_ == 0 ? static_cast<double>(replay_rows)
                                   : kDecay * replay_rows_ + (1 - kDecay) * static_cast<double>(replay_rows);
}

double DvrController::LaterCost(const StepShape& decode, int64_t verify_rows) const {
  // A verify step of v replay rows beside the step's decode rows, where v is what recent verify
  // steps held (else what one could hold).
  const int64_t v = std::max<int64_t>(1, replay_rows_ > 0 ? std::llround(replay_rows_) : verify_rows);
  StepShape verify = decode;
  verify.fixed_rows += v;
  const double replay_row = (cost_.Predict(verify) - cost_.Predict(decode)) / static_cast<double>(v);
  StepShape one_more = decode;
  one_more.fast_rows += 1;
  const double fast_row = cost_.Predict(one_more) - cost_.Predict(decode);
  const double recompute = recent_verified_ > 0 ? recent_discarded_ / recent_verified_ : 0.0;
  return (1 + recompute) * replay_row + recompute * fast_row;
}

DvrController::DecodeChoice DvrController::ChooseDecode(int64_t n, int64_t clean, const StepShape& rest,
                                                      int64_t plain_decodes, int64_t verify_rows) {
  switch (policy_.decode_path) {
    case DecodePath::kFixed:
      converge_ = true;
      return DecodeChoice::kDirect;
    case DecodePath::kVerify:
      converge_ = false;
      return DecodeChoice::kCandidates;
    case DecodePath::kAuto:
      break;
  }
  // A step of deterministic rows alone: decoding them under fixed makes it a batch_invariant
  // step, one pass that commits every row, where verifying computes every token twice (under
  // fast, then replayed under fixed). Converge: requests still holding candidates verify them
  // (and decode the token after them) in the next step, and decode under fixed after.
  if (rest.fast_rows == 0) {
    converge_ = true;
    return DecodeChoice::kDirect;
  }
  // Beside plain rows it depends on the backend: the CPU streams each weight once for both
  // schedules, a GPU runs a second pass of GEMMs. The steady states are judged on steps of the
  // plain rows and the deterministic ones (a verify pass or a deterministic prefill in this step
  // is not in every step); this step's fixed rows are what clean rows may ride along.
  const StepShape plain{rest.fast_rows, 0, rest.attended};
  StepShape candidates = plain, direct = plain, all_fixed = plain;
  candidates.fast_rows += n;
  direct.fixed_rows += n;
  all_fixed.fast_rows -= plain_decodes;
  all_fixed.fixed_rows += n + plain_decodes;
  constexpr int kChoices = 3;
  const StepShape shapes[kChoices] = {candidates, direct, all_fixed};
  // Only shapes the fit can predict compete (a choice that makes a shape run shows its cost).
  bool known[kChoices];
  for (int c = 0; c < kChoices; ++c) known[c] = cost_.Predictable(shapes[c], kMinSeen);
  // What each adds to the plain rows (the margin is on that, not on the whole step).
  const double base = cost_.Predict(plain);
  const double later = LaterCost(candidates, verify_rows);
  double adds[kChoices];
  for (int c = 0; c < kChoices; ++c) adds[c] = cost_.Predict(shapes[c]) - base;
  adds[0] += static_cast<double>(n) * later;
  auto index = [](DecodeChoice c) { return static_cast<int>(c); };
  if (!known[index(steady_)]) steady_ = DecodeChoice::kCandidates;
  for (int c = 0; c < kChoices; ++c) {
    if (known[c] && known[index(steady_)] && (1 + kSwitchMargin) * adds[c] < adds[index(steady_)]) {
      steady_ = static_cast<DecodeChoice>(c);
    }
  }
  converge_ = steady_ != DecodeChoice::kCandidates;
  DecodeChoice choice = steady_;
  if (!converge_ && clean > 0 && rest.fixed_rows > 0) {
    StepShape ride = rest, fast_here = rest;
    ride.fixed_rows += clean;
    ride.fast_rows += n - clean;
    fast_here.fast_rows += n;
    if (!known[index(DecodeChoice::kDirect)] ||
        cost_.Predict(ride) - cost_.Predict(fast_here) <= static_cast<double>(clean) * later) {
      choice = DecodeChoice::kDirect;
    }
  }
  // Every kExplorePeriod-th choice (every fourth until all three are known) takes another in
  // turn for one step, so that the cost model keeps seeing every shape compared.
  const bool all_known = known[0] && known[1] && known[2];
  if (decisions_++ % (all_known ? kExplorePeriod : kExplorePeriod / 4) == 0) {
    choice = static_cast<DecodeChoice>((index(steady_) + 1 + explored_++ % (kChoices - 1)) % kChoices);
  }
  return choice;
}

void DvrController::Count(Sequence& s, const Verdict& v) {
  stats_.Count(*s.request, Stat::kTokensVerified, v.verified);
  stats_.Count(*s.request, Stat::kVerifyPasses);
  if (s.drafted > 0) {  // drafts: their own counts, not the fast path's recompute rate
    const int64_t checked = std::min(s.drafted, v.verified);
    stats_.Count(*s.request, Stat::kDraftTokensAccepted, v.disagreed ? std::max<int64_t>(0, checked - 1) : checked);
    s.drafted -= checked;
    return;
  }
  constexpr double kDecay = 0.98;
  recent_verified_ = kDecay * recent_verified_ + static_cast<double>(v.verified);
  recent_discarded_ = kDecay * recent_discarded_ + static_cast<double>(v.discarded);
  if (v.discarded > 0) {
    stats_.Count(*s.request, Stat::kRollbacks);
    stats_.Count(*s.request, Stat::kTokensRolledBack, v.discarded);
  }
}

void DvrController::Settle(Sequence& s, const Verdict& v, KvCache& cache) {
  if (v.disagreed) {
    s.DropCandidates();  // past the disagreement (an injected one leaves agreed candidates)
  } else if (s.candidates() > 0) {
    return;  // part of a window: the rest stays ready
  }
  // Everything before the last committed token now holds fixed-schedule K/V; the rest goes.
  s.ready = false;
  s.n_computed = s.n_committed - 1;
  cache.Truncate(s.kv_seq, s.n_computed);
  stats_.Check(s.candidates() == 0 && cache.reserved_positions(s.kv_seq) ==
                                          cache.BlocksFor(s.n_computed) * cache.block_size(),
               "after a verify pass the cache holds exactly the committed prefix");
  if (!policy_.adaptive_window) return;
  s.window = std::min(policy_.window, v.disagreed ? std::max(2, policy_.window / 8) : 2 * s.window);
}

}  // namespace llm42
