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
    if (std::isnan(value) || value == INFINITY || (std::isfinite(value) && std::abs(value) > kMaxBias)) {
      return absl::OutOfRangeError(absl::StrCat("logit bias of token ", token, " is ", value,
                                                "; a number in [-", kMaxBias, ", ", kMaxBias, "] or -infinity"));
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

void LogitEditsOf(const LogitControls& c, std::span<const int32_t> history, int64_t n_vocab,
                  std::vector<LogitEdit>* edits) {
  edits->clear();
  for (const auto& [token, value] : c.bias) {
    if (token >= 0 && token < n_vocab) edits->push_back(LogitEdit{token, 0, value, 1});
  }
  if (!c.penalizes()) return;
  const size_t n = c.penalty_last_n == 0 ? history.size()
                                         : std::min(history.size(), static_cast<size_t>(c.penalty_last_n));
  absl::flat_hash_map<int32_t, int32_t> count;
  for (int32_t t : history.last(n)) {
    if (t >= 0 && t < n_vocab) ++count[t];
  }
  const size_t biased = edits->size();
  for (const auto& [token, times] : count) {
    auto it = std::lower_bound(edits->begin(), edits->begin() + static_cast<std::ptrdiff_t>(biased), token,
                               [](const LogitEdit& e, int32_t t) { return e.token < t; });
    if (it != edits->begin() + static_cast<std::ptrdiff_t>(biased) && it->token == token) {
      it->times = times;
    } else {
      edits->push_back(LogitEdit{token, times, 0.0f, 0});
    }
  }
  std::sort(edits->begin(), edits->end(), [](const LogitEdit& a, const LogitEdit& b) { return a.token < b.token; });
}

void ApplyLogitControls(const LogitControls& c, std::span<const int32_t> history, std::span<float> logits) {
  thread_local std::vector<LogitEdit> edits;
  LogitEditsOf(c, history, static_cast<int64_t>(logits.size()), &edits);
  ApplyEdits(edits.data(), static_cast<int64_t>(edits.size()), c.penalty_rule(), logits.data());
}

}  // namespace llm42
