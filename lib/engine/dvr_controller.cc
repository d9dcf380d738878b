#include "lib/engine/dvr_controller.h"

#include <algorithm>

#include "lib/kv/kv_cache.h"
#include "lib/sampling/philox.h"

namespace llm42 {

DvrController::DvrController(const DeterminismPolicy& policy, EngineStats& stats)
    : policy_(policy), stats_(stats) {}

void DvrController::AddCandidate(Sequence& s, int32_t token, double margin, bool ends) {
  s.tokens.push_back(token);
  stats_.Check(s.candidates() <= policy_.window, "a window holds at most W candidates");
  const bool close = policy_.early_verify && margin < kEarlyVerifyMargin;
  // A step that decodes under fixed has requests still holding candidates verify them at once,
  // so that they decode under fixed after.
  s.ready = s.candidates() >= s.window || ends || close || direct_;
}

DvrController::Verdict DvrController::Verify(
    const Sequence& s, int64_t n, bool logprobs, int top_n,
    const std::function<std::span<const float>(int64_t)>& row) {
  Verdict v;
  v.verified = n;
  const int64_t base = s.n_committed;
  for (int64_t j = 0; j < n; ++j) {
    const std::span<const float> logits = row(j);
    const int32_t predicted = SampleToken(logits, s.sampling, base + j);
    v.tokens.push_back(predicted);
    if (logprobs || top_n > 0) {
      const LogSoftmax lp(logits);  // once for both
      if (logprobs) v.logprobs.push_back(lp(logits[static_cast<size_t>(predicted)]));
      if (top_n > 0) AppendTopLogprobs(logits, top_n, lp, &v.top);
    }
    if (predicted != s.tokens[static_cast<size_t>(base + j)]) {
      v.disagreed = true;
      break;
    }
  }
  // Testing hook: force a rollback in a fraction of passes, at a position the replay agreed
  // with (the committed output must not change).
  const double inject = policy_.mismatch_injection;
  if (!v.disagreed && inject > 0 && n > 1 &&
      PhiloxUniform(s.sampling.seed ^ s.arrival, static_cast<uint64_t>(base), 7) < inject) {
    const auto at = static_cast<size_t>(PhiloxUniform(s.sampling.seed, static_cast<uint64_t>(base), 8) *
                                        static_cast<double>(n - 1));
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

bool DvrController::DecodeDirect(int64_t n, const StepShape& rest, int64_t verify_rows) {
  switch (policy_.decode_path) {
    case DecodePath::kFixed:
      return direct_ = true;
    case DecodePath::kVerify:
      return direct_ = false;
    case DecodePath::kAuto:
      break;
  }
  constexpr int64_t kExploreSteps = 8;
  // Until the steps have shown what fixed rows cost, alternate, so that both kinds are seen.
  if (!cost_.Explored(kExploreSteps)) return direct_ = (explore_steps_++ % 2 == 0);
  StepShape fixed = rest, fast = rest;
  fixed.fixed_rows += n;
  fast.fast_rows += n;
  const double direct = cost_.Predict(fixed) - cost_.Predict(fast);
  // A later verify step of v replay rows, beside the decode rows this step has.
  const int64_t v = std::max<int64_t>(1, verify_rows);
  const StepShape decode_only{rest.fast_rows, 0, rest.attended};
  StepShape verify = decode_only;
  verify.fixed_rows = v;
  const double replay_row = (cost_.Predict(verify) - cost_.Predict(decode_only)) / static_cast<double>(v);
  const double fast_row = (cost_.Predict(fast) - cost_.Predict(rest)) / static_cast<double>(n);
  const double recompute = recent_verified_ > 0 ? recent_discarded_ / recent_verified_ : 0.0;
  const double via_verify = static_cast<double>(n) * ((1 + recompute) * replay_row + recompute * fast_row);
  direct_ = direct_ ? direct <= (1 + kSwitchMargin) * via_verify : (1 + kSwitchMargin) * direct <= via_verify;
  return direct_;
}

void DvrController::Count(Sequence& s, const Verdict& v) {
  constexpr double kDecay = 0.98;
  recent_verified_ = kDecay * recent_verified_ + static_cast<double>(v.verified);
  recent_discarded_ = kDecay * recent_discarded_ + static_cast<double>(v.discarded);
  s.request->AddVerify(v.verified, v.discarded);
  stats_.Add(Stat::kTokensVerified, v.verified);
  stats_.Add(Stat::kVerifyPasses);
  if (v.discarded > 0) {
    stats_.Add(Stat::kRollbacks);
    stats_.Add(Stat::kTokensRolledBack, v.discarded);
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
