#include "lib/engine/scheduler.h"

#include <algorithm>

#include "lib/kv/kv_cache.h"

namespace llm42 {

Scheduler::Scheduler(SchedulerLimits limits, KvCache& cache, EngineStats& stats)
    : limits_(limits), cache_(cache), stats_(stats) {}

void Scheduler::Enqueue(std::unique_ptr<Sequence> seq) { waiting_.push_back(std::move(seq)); }

void Scheduler::UpdateBlocksInUse() {
  stats_.set_blocks_in_use(cache_.n_blocks() - cache_.free_blocks());
  stats_.Add(Stat::kKvEvictions, cache_.evictions() - evictions_reported_);
  evictions_reported_ = cache_.evictions();
  stats_.Add(Stat::kKvWindowReleases, cache_.window_releases() - window_releases_reported_);
  window_releases_reported_ = cache_.window_releases();
}

void Scheduler::ReleaseBehindWindows() {
  if (limits_.kv_window <= 0) return;
  for (const auto& s : running_) {
    if (s->kv_seq < 0) continue;
    const int64_t lowest = s->dvr ? std::min(s->n_computed, s->n_committed - 1) : s->n_computed;
    cache_.ReleaseBefore(s->kv_seq, lowest - limits_.kv_window + 1);
  }
}

void Scheduler::Release(Sequence& seq) {
  if (seq.kv_seq >= 0) {
    cache_.Free(seq.kv_seq);
    seq.kv_seq = -1;
  }
  seq.n_computed = 0;
  UpdateBlocksInUse();
}

std::vector<std::unique_ptr<Sequence>> Scheduler::TakeCancelled() {
  std::vector<std::unique_ptr<Sequence>> out;
  auto take = [&](auto& queue) {
    for (auto it = queue.begin(); it != queue.end();) {
      if ((*it)->request->cancel_requested()) {
        Release(**it);
        out.push_back(std::move(*it));
        it = queue.erase(it);
      } else {
        ++it;
      }
    }
  };
  take(running_);
  take(waiting_);
  return out;
}

void Scheduler::Admit() {
  while (!waiting_.empty() && static_cast<int64_t>(running_.size()) < limits_.max_running_requests) {
    Sequence& next = *waiting_.front();
    next.kv_seq = cache_.Create();
    // The longest cached prefix of the committed tokens (kv_cache.h), leaving the last to compute
    // (its logits are wanted); a deterministic request (Sequence::fixed_kv) takes only K/V
    // computed under fixed, and one verified by DVR leaves the last two after a preemption, so
    // that the token after its prefix is committed directly as in a cold recompute
    // (Sequence::fixed_prefill).
    // A request scoring its prompt maps only rows already scored (none before a preemption).
    const int64_t keep = next.dvr && next.n_committed > next.n_prompt ? 2 : 1;
    int64_t most = next.n_committed - keep;
    if (next.request->options().prompt_logprobs) most = std::min(most, next.prompt_scored);
    next.n_computed = cache_.MapCachedPrefix(next.kv_seq, std::span(next.tokens).first(static_cast<size_t>(next.n_committed)),
                                             most, next.fixed_kv);
    next.fresh_state = true;
    // Admit only what the cache can start on: its first chunk must fit in the free blocks.
    const int64_t first = std::min<int64_t>(next.pending(), limits_.max_batch_tokens);
    if (cache_.BlocksFor(first) > cache_.free_blocks() && !running_.empty()) {
      Release(next);
      break;
    }
    if (next.n_computed > 0) {
      stats_.Count(*next.request, Stat::kCachedPromptTokens, next.n_computed);
    }
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
}

void Scheduler::Preempt(Sequence& victim) {
  Release(victim);
  // Unverified candidates are dropped; the committed prefix is recomputed on readmission.
  victim.DropCandidates();
  stats_.Count(*victim.request, Stat::kPreemptions);
  auto it = std::find_if(running_.begin(), running_.end(),
                         [&](const std::unique_ptr<Sequence>& s) { return s.get() == &victim; });
  std::unique_ptr<Sequence> owned = std::move(*it);
  running_.erase(it);
  auto pos = std::find_if(waiting_.begin(), waiting_.end(), [&](const std::unique_ptr<Sequence>& s) {
    return s->arrival > owned->arrival;
  });
  waiting_.insert(pos, std::move(owned));
}

// Reserves cache room for `seq` up to `positions`, preempting the newest running requests not
// yet in this step's batch while the pool is short. False when `seq` itself had to go.
bool Scheduler::ReserveOrPreempt(Sequence& seq, int64_t positions) {
  while (!cache_.Reserve(seq.kv_seq, positions)) {
    Sequence* victim = &seq;
    for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
      if (!(*it)->planned && it->get() != &seq) {
        victim = it->get();
        break;
      }
    }
    // Only requests older than `seq` or already planned remain: `seq` yields.
    if (victim != &seq && victim->arrival < seq.arrival) victim = &seq;
    Preempt(*victim);
    if (victim == &seq) return false;
  }
  return true;
}

std::vector<PlanEntry> Scheduler::Plan() {
  ReleaseBehindWindows();
  std::vector<PlanEntry> plan;
  int64_t budget = limits_.max_batch_tokens;
  const bool any_ready = std::any_of(running_.begin(), running_.end(),
                                     [](const std::unique_ptr<Sequence>& s) { return s->ready; });
  // 1. Decode rows. Preemption only removes requests newer than the one being planned, so the
  // index walk stays valid.
  const int64_t verify_reserve = any_ready && limits_.max_batch_tokens > 1 ? 1 : 0;
  for (size_t i = 0; i < running_.size() && budget > verify_reserve; ++i) {
    Sequence& s = *running_[i];
    if (!s.decoding()) continue;
    if (!ReserveOrPreempt(s, s.n_computed + 1)) break;  // s (the newest unplanned) was preempted
    plan.push_back({&s, RowKind::kDecode, s.n_computed, 1});
    s.planned = true;
    --budget;
  }
  // 2. Verification: the last committed token and the candidates, at their positions. When the
  // whole window fits, the last candidate is fed too (its position reserved here, the others'
  // already are): its row's token follows the window under fixed and is committed directly when
  // every candidate agrees, as a decode under fixed would commit it, so the step that verifies a
  // request also decodes it.
  int32_t group = 0;
  for (size_t i = 0; i < running_.size() && budget > 0 && group < limits_.verify_group; ++i) {
    Sequence& s = *running_[i];
    if (!s.ready) continue;
    int64_t n = std::min(s.candidates(), budget);
    if (n == s.candidates() && budget > n && cache_.Reserve(s.kv_seq, static_cast<int64_t>(s.tokens.size()))) ++n;
    plan.push_back({&s, RowKind::kVerify, s.n_committed - 1, n});
    s.planned = true;
    budget -= n;
    ++group;
  }
  // 3. Prefill chunks.
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Sequence& s = *running_[i];
    if (s.ready || (s.pending() <= 1 && !s.fixed_prefill())) continue;
    int64_t n = std::min(s.pending(), budget);
    // A prefill takes what the pool can give without preempting anyone already planned; if
    // nothing is planned it may preempt newer requests to make progress.
    const int64_t can = cache_.reserved_positions(s.kv_seq) +
                        cache_.free_blocks() * cache_.block_size() - s.n_computed;
    if (can < n) n = plan.empty() ? n : std::max<int64_t>(0, can);
    if (n == 0) continue;
    if (!ReserveOrPreempt(s, s.n_computed + n)) break;
    plan.push_back({&s, RowKind::kPrefill, s.n_computed, n});
    s.planned = true;
    budget -= n;
  }
  UpdateBlocksInUse();
  for (const PlanEntry& e : plan) e.seq->planned = false;
  return plan;
}

std::unique_ptr<Sequence> Scheduler::Remove(Sequence* seq) {
  auto it = std::find_if(running_.begin(), running_.end(),
                         [&](const std::unique_ptr<Sequence>& p) { return p.get() == seq; });
  std::unique_ptr<Sequence> owned = std::move(*it);
  running_.erase(it);
  return owned;
}

std::vector<std::unique_ptr<Sequence>> Scheduler::TakeAll() {
  std::vector<std::unique_ptr<Sequence>> out;
  for (auto& s : running_) out.push_back(std::move(s));
  for (auto& s : waiting_) out.push_back(std::move(s));
  running_.clear();
  waiting_.clear();
  for (auto& s : out) Release(*s);
  return out;
}

}  // namespace llm42
