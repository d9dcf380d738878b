#include "lib/sampling/sampler.h"

#include <algorithm>
#include <cmath>

#include "lib/sampling/philox.h"

namespace llm42 {
namespace {

int32_t Argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
  }
  return best;
}

}  // namespace

std::vector<Candidate> SamplingCandidates(std::span<const float> logits, const SamplingParams& p) {
  const auto n = static_cast<int32_t>(logits.size());
  std::vector<int32_t> ids(logits.size());
  for (int32_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = i;
  auto order = [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  size_t keep = ids.size();
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < keep) {
    keep = static_cast<size_t>(p.top_k);
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(keep), ids.end(), order);
  } else {
    std::sort(ids.begin(), ids.end(), order);
  }
  ids.resize(keep);

  std::vector<Candidate> c(keep);
  const double max_logit = logits[static_cast<size_t>(ids[0])];
  const double t = p.temperature > 0 ? p.temperature : 1.0;
  double total = 0;
  for (size_t i = 0; i < keep; ++i) {
    const double e = std::exp((logits[static_cast<size_t>(ids[i])] - max_logit) / t);
    c[i] = Candidate{ids[i], e};
    total += e;
  }
  for (Candidate& x : c) x.prob /= total;

  if (p.top_p < 1.0f) {
    double cum = 0;
    size_t i = 0;
    while (i < c.size()) {
      cum += c[i].prob;
      ++i;
      if (cum >= p.top_p) break;
    }
    c.resize(i);
  }
  if (p.min_p > 0.0f) {
    const double floor = p.min_p * c[0].prob;
    size_t i = 1;
    while (i < c.size() && c[i].prob >= floor) ++i;
    c.resize(i);
  }
  total = 0;
  for (const Candidate& x : c) total += x.prob;
  for (Candidate& x : c) x.prob /= total;
  return c;
}

int32_t SampleToken(std::span<const float> logits, const SamplingParams& p, int64_t position) {
  if (p.temperature <= 0.0f || p.top_k == 1) return Argmax(logits);
  const std::vector<Candidate> c = SamplingCandidates(logits, p);
  const double u = PhiloxUniform(p.seed, static_cast<uint64_t>(position));
  double cum = 0;
  for (const Candidate& x : c) {
    cum += x.prob;
    if (u < cum) return x.id;
  }
  return c.back().id;  // rounding left u at or above the final cumulative sum
}

float TokenLogprob(std::span<const float> logits, int32_t token) {
  double max_logit = logits[0];
  for (float l : logits) max_logit = std::max<double>(max_logit, l);
  double total = 0;
  for (float l : logits) total += std::exp(l - max_logit);
  return static_cast<float>(logits[static_cast<size_t>(token)] - max_logit - std::log(total));
}

}  // namespace llm42
