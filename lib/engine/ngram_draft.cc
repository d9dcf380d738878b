#include "lib/engine/ngram_draft.h"

#include <algorithm>

namespace llm42 {

std::vector<int32_t> NgramDraft(std::span<const int32_t> tokens, int64_t max_draft) {
  const auto size = static_cast<int64_t>(tokens.size());
  if (max_draft <= 0) return {};
  for (int64_t n = std::min<int64_t>(kMaxNgram, size - 1); n >= kMinNgram; --n) {
    const auto suffix = tokens.subspan(static_cast<size_t>(size - n));
    // The latest occurrence that ends before the suffix begins to be itself.
    for (int64_t start = size - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      const int64_t from = start + n, count = std::min(max_draft, size - from);
      return std::vector<int32_t>(tokens.begin() + from, tokens.begin() + from + count);
    }
  }
  return {};
}

}  // namespace llm42
