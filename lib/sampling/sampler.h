#ifndef LLM42_SAMPLING_SAMPLER_H_
#define LLM42_SAMPLING_SAMPLER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "lib/numerics/argmax.h"

namespace llm42 {

struct SamplingParams {
  float temperature = 0.0f;  // 0 = greedy
  int32_t top_k = 0;         // 0 = off
  float top_p = 1.0f;        // 1 = off
  float min_p = 0.0f;        // 0 = off
  uint64_t seed = 0;
};

struct Candidate {
  int32_t id;
  double prob;  // normalized over the kept candidates
};

// The distribution a token is drawn from, in draw order: logits sorted descending (ties by
// lower id), top-k, softmax at the temperature, top-p (smallest prefix reaching p), min-p
// (probability >= min_p * the best), renormalized. Deterministic in its inputs: the
// normalizing sums run over the candidates in draw order, or over the whole vocabulary in id
// order when nothing is filtered out (so a draw sorts only as far as it walks).
std::vector<Candidate> SamplingCandidates(std::span<const float> logits, const SamplingParams& p);

// The token for `position` of a sequence: argmax (lowest id on ties) when greedy, otherwise the
// first candidate, in draw order, whose cumulative weight exceeds
// PhiloxUniform(seed, position) times the candidates' total.
int32_t SampleToken(std::span<const float> logits, const SamplingParams& p, int64_t position);

// A draw, and how close it came to being another token: the smallest gap, over the decisions
// that picked it, between the value compared and its threshold. Greedy and top-k: the logit
// gap at the cut, divided by max(1, |logit|); the draw and top-p: in units of probability
// (cumulative weight over the total); min-p: weight ratio against min_p. A draw whose margin is
// well above the logits' rounding noise cannot change when they are recomputed another way.
struct SampledToken {
  int32_t token;
  double margin;
};

// Whether draws under `p` are greedy (temperature 0, or top-k 1): they need only the row's
// ArgmaxSummary.
bool IsGreedy(const SamplingParams& p);
// A greedy draw from its row's summary (what SampleWithMargin returns for the row when IsGreedy).
SampledToken GreedyDraw(const ArgmaxSummary& s, size_t n_vocab);
SampledToken SampleWithMargin(std::span<const float> logits, const SamplingParams& p,
                              int64_t position);

// log softmax(logits) at temperature 1, as (max, log of the shifted sum): one pass over the
// vocabulary, then any logit's logprob. The one rule for every logprob llm42 reports.
class LogSoftmax {
 public:
  explicit LogSoftmax(std::span<const float> logits);
  float operator()(float logit) const { return static_cast<float>(logit - max_logit_ - log_total_); }

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
