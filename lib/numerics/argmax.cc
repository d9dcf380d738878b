#include "lib/numerics/argmax.h"

#include <algorithm>
#include <limits>

namespace llm42 {

ArgmaxSummary SummarizeArgmax(std::span<const float> logits) {
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
  return {best, logits[static_cast<size_t>(best)], second};
}

}  // namespace llm42
