#ifndef LLM42_SAMPLING_SAMPLER_H_
#define LLM42_SAMPLING_SAMPLER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "lib/numerics/argmax.h"
#include "lib/numerics/draw_rule.h"

namespace llm42 {

struct Candidate {
  int32_t id;
  double prob;  // normalized over the kept candidates
};

// The distribution a token is drawn from, in draw order, by lib/numerics/draw_rule.h's rule
// (SamplingParams and SampledToken are there too): logits sorted descending (ties by lower id),
// top-k, weights e^((logit - max) / T) in fixed point, top-p (the shortest prefix reaching p of
// the weights), min-p (weight at least min_p times the best's), renormalized. Every sum is an
// exact integer sum, so the rule gives the same bits however it is computed (a device computes
// it by selection, without sorting; the host walks a lazily sorted order, as far as it looks).
std::vector<Candidate> SamplingCandidates(std::span<const float> logits, const SamplingParams& p);

// The token for `position` of a sequence: argmax (lowest id on ties) when greedy, otherwise the
// first candidate, in draw order, whose cumulative weight exceeds the draw's target
// (DrawTarget(PhiloxBits53(seed, position), the candidates' total)).
int32_t SampleToken(std::span<const float> logits, const SamplingParams& p, int64_t position);

// A greedy draw from its row's summary (what SampleWithMargin returns for the row when IsGreedy).
SampledToken GreedyDraw(const ArgmaxSummary& s, size_t n_vocab);
SampledToken SampleWithMargin(std::span<const float> logits, const SamplingParams& p,
                              int64_t position);

// log softmax(logits) at temperature 1, as (max, log of the weights' sum: draw_rule.h's
// LogTotal): one pass over the vocabulary, then any logit's logprob. The one rule for every
// logprob llm42 reports.
class LogSoftmax {
 public:
  explicit LogSoftmax(std::span<const float> logits);
  float operator()(float logit) const { return Logprob(logit, max_logit_, log_total_); }

 private:
  double max_logit_ = 0, log_total_ = 0;
};

// Natural-log probability of `token` under softmax(logits) at temperature 1.
float TokenLogprob(std::span<const float> logits, int32_t token);

// One of a position's most likely tokens, with its logprob as TokenLogprob computes it (the
// same bits).
struct TopLogprob {
  int32_t token;
  float logprob;
  bool operator==(const TopLogprob&) const = default;
};
// Appends the n most likely tokens of `logits` (logit descending, lower id first on ties), their
// logprobs from `lp` (LogSoftmax of the same logits).
void AppendTopLogprobs(std::span<const float> logits, int n, const LogSoftmax& lp, std::vector<TopLogprob>* out);

}  // namespace llm42

#endif  // LLM42_SAMPLING_SAMPLER_H_
