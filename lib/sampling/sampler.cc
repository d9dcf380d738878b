#include "lib/sampling/sampler.h"

#include <algorithm>
#include <bit>
#include <utility>
#include <cmath>
#include <limits>

#include "lib/numerics/draw_rule.h"
#include "lib/numerics/philox.h"
#include "lib/numerics/portable_math.h"
#include "lib/util/thread_scratch.h"

namespace llm42 {

namespace {

// Per-thread buffers (one per kTag) for a draw's vocabulary-sized arrays (a fresh megabyte per draw cost more
// in page faults and zeroing than the work). A nested user, if any, allocates its own.
template <typename T, int kTag>
class ThreadBuffer {
 public:
  ThreadBuffer() : own_(in_use_ ? &fallback_ : &ThreadScratch<std::vector<T>, ThreadBuffer>()), claimed_(!in_use_) {
    in_use_ = true;
  }
  ThreadBuffer(const ThreadBuffer&) = delete;
  ThreadBuffer& operator=(const ThreadBuffer&) = delete;
  ~ThreadBuffer() {
    if (claimed_) in_use_ = false;
  }
  std::vector<T>& operator*() { return *own_; }
  std::vector<T>* operator->() { return own_; }

 private:
  static thread_local bool in_use_;
  std::vector<T> fallback_;
  std::vector<T>* own_;
  bool claimed_;
};
template <typename T, int kTag>
thread_local bool ThreadBuffer<T, kTag>::in_use_ = false;

// Token ids in sampling order (logit descending, lower id first on ties), sorted lazily: only as
// far as a caller looks. Each entry is one 64-bit key, the logit's order above the id, so the
// order is one integer comparison. The first look selects the best 64 or more by a histogram of
// the keys' top bits (a top-k draw rarely needs more); a walk past them, as a draw from an
// unfiltered flat distribution makes (half the vocabulary on average), radix-sorts the rest.
// 128256 tokens, one draw at T = 0.8 from N(0, 1) logits: 7.3 ms with rounds of nth_element
// over ids compared through the logits, top-k 40 1.6 ms (2026-12-01).
class LazyOrder {
 public:
  explicit LazyOrder(std::span<const float> logits) : n_(logits.size()), count_(kDigitMask + 1) {
    keys_->resize(n_);
    uint64_t* keys = keys_->data();
    for (size_t i = 0; i < n_; ++i) {
      keys[i] = OrderKey(logits[i], static_cast<int64_t>(i));  // draw_rule.h
      ++count_[keys[i] >> (64 - kDigitBits)];  // the first Select's histogram
    }
  }
  size_t size() const { return n_; }
  int32_t operator[](size_t i) {
    if (i >= sorted_) Extend(i + 1);
    return static_cast<int32_t>((*keys_)[i] & 0xffffffffu);
  }

 private:
  static constexpr int kDigitBits = 11;
  static constexpr uint64_t kDigitMask = (uint64_t{1} << kDigitBits) - 1;

  // Invariant: keys [0, sorted_) are the first sorted_ of the order, in order; the rest follow
  // in ascending id order (what a stable radix pass over the key's bits needs).
  void Extend(size_t n) {
    // At least the best 64, or 16 times as many as before: few passes over the rest.
    const size_t target = std::min(n_, std::max({n, size_t{64}, 16 * sorted_}));
    if (target <= n_ / 8 && Select(target)) return;
    RadixSortRest();
  }

  // Sorts the rest's first `target` - sorted_ or more into place: every key whose top digit is
  // at most the one where the target-th key lies. False (nothing moved) when those would be
  // more than an eighth of the vocabulary: then the radix sort is cheaper.
  bool Select(size_t target) {
    uint64_t* rest = keys_->data() + sorted_;
    const size_t n = n_ - sorted_, need = target - sorted_;
    std::vector<uint32_t>& count = count_;
    if (sorted_ > 0) {
      std::fill(count.begin(), count.end(), 0);
      for (size_t i = 0; i < n; ++i) ++count[rest[i] >> (64 - kDigitBits)];
    }
    uint64_t cut = 0;
    size_t within = count[0];
    while (within < need) within += count[++cut];
    if (sorted_ + within > n_ / 8) return false;
    scratch_->resize(n);
    uint64_t* front = rest;
    uint64_t* back = scratch_->data();
    size_t n_back = 0;
    for (size_t i = 0; i < n; ++i) {  // stable: both parts keep ascending ids
      const uint64_t k = rest[i];
      if (k >> (64 - kDigitBits) <= cut) {
        *front++ = k;
      } else {
        back[n_back++] = k;
      }
    }
    std::copy(back, back + n_back, front);
    std::sort(rest, rest + within);
    sorted_ += within;
    return true;
  }

  // Least significant digit first over the key's 32 bits (the ids are already ascending).
  void RadixSortRest() {
    const size_t n = n_ - sorted_;
    scratch_->resize(n);
    std::vector<uint32_t>& count = count_;
    uint64_t* src = keys_->data() + sorted_;
    uint64_t* dst = scratch_->data();
    int passes = 0;
    for (int shift = 32; shift < 64; shift += kDigitBits, ++passes) {
      std::fill(count.begin(), count.end(), 0);
      for (size_t i = 0; i < n; ++i) ++count[(src[i] >> shift) & kDigitMask];
      uint32_t sum = 0;
      for (uint32_t& c : count) sum += std::exchange(c, sum);
      for (size_t i = 0; i < n; ++i) dst[count[(src[i] >> shift) & kDigitMask]++] = src[i];
      std::swap(src, dst);
    }
    if (passes % 2 == 1) std::copy(src, src + n, dst);
    sorted_ = n_;
  }

  size_t n_;
  std::vector<uint32_t> count_;  // a digit histogram: of the rest's top digits until Extend
  ThreadBuffer<uint64_t, 0> keys_;
  ThreadBuffer<uint64_t, 1> scratch_;
  size_t sorted_ = 0;
};

// The filtered distribution, by draw_rule.h's rule: `order` holds the candidates first to last,
// weight(i) the fixed-point weight of order[i]; kept() of them survive.
class Filtered {
 public:
  Filtered(std::span<const float> logits, const SamplingParams& p) : order_(logits), logits_(logits) {
    max_ = logits[static_cast<size_t>(order_[0])];
    t_ = p.temperature > 0 ? p.temperature : 1.0;
    kept_ = order_.size();
    if (p.top_k > 0 && static_cast<size_t>(p.top_k) < kept_) {
      kept_ = static_cast<size_t>(p.top_k);
      cut_margin_ = LogitGap(logits[static_cast<size_t>(order_[kept_ - 1])], logits[static_cast<size_t>(order_[kept_])]);
    }
    // The top-k set's weights (in order), or the whole vocabulary's (in id order: no sort).
    uint64_t total = 0;
    if (kept_ < order_.size()) {
      for (size_t i = 0; i < kept_; ++i) total += Weight(i);
    } else {
      // Each token's weight, kept for the draw's walk (the bits DrawWeight computes).
      exps_->resize(logits.size());
      by_id_->resize(logits.size());
      PortableExpScaled(logits.data(), max_, t_, exps_->data(), static_cast<int64_t>(logits.size()));
      uint64_t* w = by_id_->data();
      for (size_t i = 0; i < logits.size(); ++i) total += w[i] = FixedWeight((*exps_)[i]);
      cached_ = true;
    }
    if (p.top_p < 1.0f && total > 0) {
      const uint64_t need = TopPNeed(p.top_p, total);
      uint64_t cum = 0;
      size_t i = 0;
      while (i < kept_) {
        const uint64_t before = cum;
        cum += Weight(i);
        ++i;
        if (cum >= need) {
          cut_margin_ = MinOf(cut_margin_, TopPMargin(before, cum, total, p.top_p));
          break;
        }
      }
      kept_ = i;
    }
    if (p.min_p > 0.0f) {  // the prefix before the first weight below the threshold
      const uint64_t min_weight = MinPNeed(p.min_p);
      uint64_t lowest_kept = Weight(0);
      size_t i = 1;
      for (; i < kept_; ++i) {
        const uint64_t w = Weight(i);
        if (w < min_weight) {
          cut_margin_ = MinOf(cut_margin_, MinPMargin(lowest_kept, w, p.min_p));
          break;
        }
        lowest_kept = std::min(lowest_kept, w);
      }
      kept_ = i;
    }
    kept_total_ = 0;
    if (kept_ < order_.size()) {
      for (size_t i = 0; i < kept_; ++i) kept_total_ += Weight(i);
    } else {
      kept_total_ = total;
    }
  }

  size_t kept() const { return kept_; }
  // The smallest gap at a top-k, top-p or min-p cut (SampledToken::margin); +inf without cuts.
  double cut_margin() const { return cut_margin_; }
  uint64_t kept_total() const { return kept_total_; }
  int32_t id(size_t i) { return order_[i]; }
  uint64_t Weight(size_t i) {
    const auto id = static_cast<size_t>(order_[i]);
    return cached_ ? (*by_id_)[id] : DrawWeight(logits_[id], max_, t_);
  }

 private:
  LazyOrder order_;
  std::span<const float> logits_;
  ThreadBuffer<double, 0> exps_;
  ThreadBuffer<uint64_t, 2> by_id_;
  bool cached_ = false;
  double max_ = 0, t_ = 1;
  uint64_t kept_total_ = 0;
  double cut_margin_ = std::numeric_limits<double>::infinity();
  size_t kept_ = 0;
};

}  // namespace

std::vector<Candidate> SamplingCandidates(std::span<const float> logits, const SamplingParams& p) {
  Filtered f(logits, p);
  std::vector<Candidate> c;
  if (f.kept_total() == 0) return {Candidate{f.id(0), 1.0}};  // the rule draws the first token
  for (size_t i = 0; i < f.kept(); ++i) {
    c.push_back(Candidate{f.id(i), static_cast<double>(f.Weight(i)) / static_cast<double>(f.kept_total())});
  }
  return c;
}

SampledToken GreedyDraw(const ArgmaxSummary& s, size_t n_vocab) {
  return {s.id, n_vocab > 1 ? LogitGap(s.best, s.second) : std::numeric_limits<double>::infinity()};
}

int32_t SampleToken(std::span<const float> logits, const SamplingParams& p, int64_t position) {
  if (IsGreedy(p)) return SummarizeArgmax(logits).id;
  return SampleWithMargin(logits, p, position).token;
}

SampledToken SampleWithMargin(std::span<const float> logits, const SamplingParams& p,
                              int64_t position) {
  if (IsGreedy(p)) return GreedyDraw(SummarizeArgmax(logits), logits.size());
  Filtered f(logits, p);
  if (f.kept_total() == 0) return {f.id(0), 0.0};
  const uint64_t target = DrawTarget(PhiloxBits53(p.seed, static_cast<uint64_t>(position)), f.kept_total());
  uint64_t cum = 0;
  for (size_t i = 0;; ++i) {  // the kept weights add up to more than target: the walk ends
    const uint64_t w = f.Weight(i);
    const uint64_t before = cum;
    cum += w;
    if (target < cum) return {f.id(i), MinOf(f.cut_margin(), DrawMargin(target, before, cum, f.kept_total()))};
  }
}

LogSoftmax::LogSoftmax(std::span<const float> logits) {
  uint64_t first = ~uint64_t{0};
  for (size_t i = 0; i < logits.size(); ++i) first = std::min(first, OrderKey(logits[i], static_cast<int64_t>(i)));
  max_logit_ = logits[static_cast<size_t>(KeyId(first))];
  ThreadBuffer<double, 3> exps;
  exps->resize(logits.size());
  PortableExpScaled(logits.data(), max_logit_, 1.0, exps->data(), static_cast<int64_t>(logits.size()));
  uint64_t total = 0;
  for (double e : *exps) total += FixedWeight(e);
  log_total_ = LogTotal(total);
}

float TokenLogprob(std::span<const float> logits, int32_t token) {
  return LogSoftmax(logits)(logits[static_cast<size_t>(token)]);
}

void AppendTopLogprobs(std::span<const float> logits, int n, const LogSoftmax& lp, std::vector<TopLogprob>* out) {
  LazyOrder order(logits);
  for (int i = 0; i < n && static_cast<size_t>(i) < logits.size(); ++i) {
    const int32_t id = order[static_cast<size_t>(i)];
    out->push_back(TopLogprob{id, lp(logits[static_cast<size_t>(id)])});
  }
}

}  // namespace llm42
