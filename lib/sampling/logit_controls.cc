#include "lib/sampling/logit_controls.h"

#include <algorithm>
#include <cmath>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace llm42 {

void LogitControls::SetBias(int32_t token, float value) {
  auto it = std::lower_bound(bias.begin(), bias.end(), token,
                             [](const std::pair<int32_t, float>& e, int32_t t) { return e.first < t; });
  if (it != bias.end() && it->first == token) {
    it->second = value;
  } else {
    bias.insert(it, {token, value});
  }
}

absl::Status LogitControls::Validate() const {
  for (const auto& [token, value] : bias) {
    if (std::isnan(value) || value == INFINITY) {
      return absl::OutOfRangeError(absl::StrCat("logit bias of token ", token, " is ", value,
                                                "; a finite number or -infinity"));
    }
  }
  if (!(repetition_penalty > 0.0f && repetition_penalty <= kMaxPenalty)) {
    return absl::OutOfRangeError(absl::StrCat("repetition penalty ", repetition_penalty, " is outside (0, ", kMaxPenalty, "]"));
  }
  if (!(std::abs(frequency_penalty) <= kMaxPenalty)) {
    return absl::OutOfRangeError(absl::StrCat("frequency penalty ", frequency_penalty, " is outside [-", kMaxPenalty,
                                              ", ", kMaxPenalty, "]"));
  }
  if (!(std::abs(presence_penalty) <= kMaxPenalty)) {
    return absl::OutOfRangeError(absl::StrCat("presence penalty ", presence_penalty, " is outside [-", kMaxPenalty,
                                              ", ", kMaxPenalty, "]"));
  }
  if (penalty_last_n < 0) return absl::OutOfRangeError(absl::StrCat("penalty last_n ", penalty_last_n, " is negative"));
  return absl::OkStatus();
}

void ApplyLogitControls(const LogitControls& c, std::span<const int32_t> history, std::span<float> logits) {
  for (const auto& [token, value] : c.bias) {
    if (static_cast<size_t>(token) < logits.size()) logits[static_cast<size_t>(token)] += value;
  }
  if (!c.penalizes()) return;
  const size_t n = c.penalty_last_n == 0 ? history.size()
                                         : std::min(history.size(), static_cast<size_t>(c.penalty_last_n));
  absl::flat_hash_map<int32_t, int32_t> count;
  for (int32_t t : history.last(n)) ++count[t];
  for (const auto& [token, times] : count) {
    if (token < 0 || static_cast<size_t>(token) >= logits.size()) continue;
    float& l = logits[static_cast<size_t>(token)];
    // llama.cpp's rule, in its order (float arithmetic, no contraction: -ffp-contract=off).
    if (l <= 0) {
      l *= c.repetition_penalty;
    } else {
      l /= c.repetition_penalty;
    }
    l -= static_cast<float>(times) * c.frequency_penalty + static_cast<float>(times > 0) * c.presence_penalty;
  }
}

}  // namespace llm42
