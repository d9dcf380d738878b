#include "lib/numerics/expert_routing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "lib/numerics/portable_math.h"

namespace llm42 {
namespace {

// The softmax of n values into out, as described in the header.
void Softmax(const float* x, int64_t n, float* out) {
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] > max) max = x[i];
  }
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    out[i] = std::isnan(x[i]) ? 0.0f : PortableExpf(x[i] - max);
    sum += static_cast<double>(out[i]);
  }
  const float inv = sum > 0 ? static_cast<float>(1.0 / sum) : 0.0f;
  for (int64_t i = 0; i < n; ++i) out[i] *= inv;
}

// Whether a ranks above b (NaN below every number; ties to the lower index, which the caller's
// scan order gives).
bool Above(float a, float b) { return !std::isnan(a) && (std::isnan(b) || a > b); }

}  // namespace

void RouteToken(const ExpertRouting& r, const float* logits, int32_t* ids, float* weights) {
  const int64_t n = r.n_expert, k = r.n_used;
  // The values experts are chosen by, and those their weights are taken from.
  thread_local std::vector<float> probs;
  probs.resize(static_cast<size_t>(n));
  switch (r.gate) {
    case ExpertRouting::Gate::kSoftmax:
      Softmax(logits, n, probs.data());
      break;
    case ExpertRouting::Gate::kSigmoid:
      for (int64_t i = 0; i < n; ++i) probs[static_cast<size_t>(i)] = 1.0f / (1.0f + PortableExpf(-logits[i]));
      break;
    case ExpertRouting::Gate::kSoftmaxChosen:
      std::copy_n(logits, n, probs.data());
      break;
  }
  // The n_used best, by decreasing value; each scan keeps the first of equals.
  thread_local std::vector<uint8_t> taken;
  taken.assign(static_cast<size_t>(n), 0);
  for (int64_t s = 0; s < k; ++s) {
    int64_t best = -1;
    for (int64_t i = 0; i < n; ++i) {
      if (taken[static_cast<size_t>(i)] != 0) continue;
      if (best < 0 || Above(probs[static_cast<size_t>(i)], probs[static_cast<size_t>(best)])) best = i;
    }
    taken[static_cast<size_t>(best)] = 1;
    ids[s] = static_cast<int32_t>(best);
    weights[s] = probs[static_cast<size_t>(best)];
  }
  if (r.gate == ExpertRouting::Gate::kSoftmaxChosen) {
    float chosen[256];  // n_used is at most 256 (ModelConfig)
    Softmax(weights, k, chosen);
    std::copy_n(chosen, k, weights);
  }
  if (r.normalize) {
    float sum = 0;
    for (int64_t s = 0; s < k; ++s) sum += weights[s];
    sum = std::max(sum, 6.103515625e-5f);  // llama.cpp's clamp: the smallest normal f16
    for (int64_t s = 0; s < k; ++s) weights[s] /= sum;
  }
  if (r.scale != 1 && r.scale != 0) {
    for (int64_t s = 0; s < k; ++s) weights[s] *= r.scale;
  }
}

}  // namespace llm42
