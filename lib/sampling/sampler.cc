#include "lib/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "lib/sampling/philox.h"
#include "lib/util/portable_math.h"

namespace llm42 {
namespace {

int32_t Argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
  }
  return best;
}

// Relative gap between two logits, the first the larger.
double LogitGap(float a, float b) {
  return (static_cast<double>(a) - b) / std::max(1.0, std::abs(static_cast<double>(a)));
}

}  // namespace

namespace {

// Token ids in sampling order (logit descending, lower id first on ties), sorted lazily: only as
// far as a caller looks, which for a draw is usually a handful of tokens out of the vocabulary.
class LazyOrder {
 public:
  explicit LazyOrder(std::span<const float> logits) : logits_(logits), ids_(logits.size()) {
    for (size_t i = 0; i < ids_.size(); ++i) ids_[i] = static_cast<int32_t>(i);
  }
  size_t size() const { return ids_.size(); }
  int32_t operator[](size_t i) {
    if (i >= sorted_) Extend(i + 1);
    return ids_[i];
  }

 private:
  bool Before(int32_t a, int32_t b) const {
    const float la = logits_[static_cast<size_t>(a)], lb = logits_[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  }
  void Extend(size_t n) {
    const size_t target = std::min(ids_.size(), std::max({n, 2 * sorted_, size_t{64}}));
    auto cmp = [this](int32_t a, int32_t b) { return Before(a, b); };
    const auto first = ids_.begin() + static_cast<std::ptrdiff_t>(sorted_);
    const auto mid = ids_.begin() + static_cast<std::ptrdiff_t>(target);
    if (mid != ids_.end()) std::nth_element(first, mid, ids_.end(), cmp);
    std::sort(first, mid, cmp);
    sorted_ = target;
  }

  std::span<const float> logits_;
  std::vector<int32_t> ids_;
  size_t sorted_ = 0;
};

// The filtered distribution, as SamplingCandidates documents it: `order` holds the candidates
// first to last, weight(i) is the unnormalized probability of order[i]; kept() of them survive.
class Filtered {
 public:
  Filtered(std::span<const float> logits, const SamplingParams& p) : order_(logits), logits_(logits) {
    max_ = logits[static_cast<size_t>(order_[0])];
    t_ = p.temperature > 0 ? p.temperature : 1.0;
    kept_ = order_.size();
    if (p.top_k > 0 && static_cast<size_t>(p.top_k) < kept_) {
      kept_ = static_cast<size_t>(p.top_k);
      cut_margin_ = LogitGap(logits[static_cast<size_t>(order_[kept_ - 1])],
                             logits[static_cast<size_t>(order_[kept_])]);
    }
    // Mass of the top-k set (in order), or of the whole vocabulary (in id order: no sort).
    double total = 0;
    if (kept_ < order_.size()) {
      for (size_t i = 0; i < kept_; ++i) total += Weight(i);
    } else {
      for (float l : logits) total += PortableExp((l - max_) / t_);
    }
    if (p.top_p < 1.0f) {
      double cum = 0;
      size_t i = 0;
      while (i < kept_) {
        const double before = cum;
        cum += Weight(i) / total;
        ++i;
        if (cum >= p.top_p) {
          cut_margin_ = std::min({cut_margin_, cum - p.top_p, p.top_p - before});
          break;
        }
      }
      kept_ = i;
    }
    if (p.min_p > 0.0f) {
      size_t i = 1;  // weight(0) = 1 is the best; weight(i)/weight(0) is the probability ratio
      while (i < kept_ && Weight(i) >= p.min_p) ++i;
      if (i < kept_) cut_margin_ = std::min({cut_margin_, Weight(i - 1) - p.min_p, p.min_p - Weight(i)});
      kept_ = i;
    }
    filtered_ = kept_ < order_.size();
    if (filtered_) {
      kept_total_ = 0;
      for (size_t i = 0; i < kept_; ++i) kept_total_ += Weight(i);
    } else {
      kept_total_ = total;
    }
  }

  size_t kept() const { return kept_; }
  // The smallest gap at a top-k, top-p or min-p cut (SampledToken::margin); +inf without cuts.
  double cut_margin() const { return cut_margin_; }
  double kept_total() const { return kept_total_; }
  int32_t id(size_t i) { return order_[i]; }
  double Weight(size_t i) { return PortableExp((logits_[static_cast<size_t>(order_[i])] - max_) / t_); }

 private:
  LazyOrder order_;
  std::span<const float> logits_;
  double max_ = 0, t_ = 1, kept_total_ = 0;
  double cut_margin_ = std::numeric_limits<double>::infinity();
  size_t kept_ = 0;
  bool filtered_ = false;
};

}  // namespace

std::vector<Candidate> SamplingCandidates(std::span<const float> logits, const SamplingParams& p) {
  Filtered f(logits, p);
  std::vector<Candidate> c;
  for (size_t i = 0; i < f.kept(); ++i) c.push_back(Candidate{f.id(i), f.Weight(i) / f.kept_total()});
  return c;
}

int32_t SampleToken(std::span<const float> logits, const SamplingParams& p, int64_t position) {
  if (p.temperature <= 0.0f || p.top_k == 1) return Argmax(logits);
  return SampleWithMargin(logits, p, position).token;
}

SampledToken SampleWithMargin(std::span<const float> logits, const SamplingParams& p,
                              int64_t position) {
  if (p.temperature <= 0.0f || p.top_k == 1) {
    // Argmax (lowest id on ties) and the runner-up in one pass.
    int32_t best = 0;
    float second = -std::numeric_limits<float>::infinity();
    for (size_t i = 1; i < logits.size(); ++i) {
      if (logits[i] > logits[static_cast<size_t>(best)]) {
        second = logits[static_cast<size_t>(best)];
        best = static_cast<int32_t>(i);
      } else {
        second = std::max(second, logits[i]);
      }
    }
    return {best, logits.size() > 1 ? LogitGap(logits[static_cast<size_t>(best)], second)
                                    : std::numeric_limits<double>::infinity()};
  }
  Filtered f(logits, p);
  const double target = PhiloxUniform(p.seed, static_cast<uint64_t>(position)) * f.kept_total();
  double cum = 0;
  for (size_t i = 0; i < f.kept(); ++i) {
    const double before = cum;
    cum += f.Weight(i);
    if (target < cum) {
      return {f.id(i), std::min(f.cut_margin(), std::min(target - before, cum - target) / f.kept_total())};
    }
  }
  // Rounding left the target at or above the final sum.
  return {f.id(f.kept() - 1), 0.0};
}

LogSoftmax::LogSoftmax(std::span<const float> logits) {
  max_logit_ = logits[0];
  for (float l : logits) max_logit_ = std::max<double>(max_logit_, l);
  double total = 0;
  for (float l : logits) total += PortableExp(l - max_logit_);
  log_total_ = PortableLog(total);
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
