#include "lib/backend/attention_splits.h"

#include <algorithm>

namespace llm42 {

AttentionSplits PlanAttentionSplits(std::span<const int32_t> positions, Schedules s, int64_t window, int64_t n_head,
                                    int64_t device_blocks) {
  AttentionSplits out;
  const auto m = static_cast<int64_t>(positions.size());
  out.rows.assign(static_cast<size_t>(2 * m), 0);
  for (int64_t i = 0; i < m; ++i) out.rows[static_cast<size_t>(2 * i + 1)] = 1;
  AttentionShape shape;
  shape.window = window;
  auto length = [&](int64_t i) {
    const int32_t p = positions[static_cast<size_t>(i)];
    return p + 1 - shape.first_position(p);
  };
  int64_t longest = 0;
  for (int64_t i = 0; i < m; ++i) {
    if (s[i] == Schedule::kFast) longest = std::max(longest, length(i));
  }
  const int64_t blocks = m * n_head;
  if (longest <= kMinAttentionSpan || blocks >= device_blocks) return out;
  // Enough spans for the longest context to fill the device, each a multiple of 64 positions.
  const int64_t wanted = (device_blocks + blocks - 1) / blocks;
  const int64_t span = std::max<int64_t>(kMinAttentionSpan, ((longest + wanted - 1) / wanted + 63) / 64 * 64);
  for (int64_t i = 0; i < m; ++i) {
    const int64_t len = length(i);
    if (s[i] != Schedule::kFast || len <= span) continue;
    const auto count = static_cast<int32_t>((len + span - 1) / span);
    out.rows[static_cast<size_t>(2 * i)] = static_cast<int32_t>(span);
    out.rows[static_cast<size_t>(2 * i + 1)] = count;
    out.max_spans = std::max(out.max_spans, count);
  }
  return out;
}

}  // namespace llm42
