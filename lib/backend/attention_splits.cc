#include "lib/backend/attention_splits.h"

#include <algorithm>

namespace llm42 {

AttentionSplits PlanAttentionSplits(std::span<const int32_t> positions, std::span<const void* const> sequences,
                                    Schedules s, int64_t window, int64_t n_head, int64_t device_blocks,
                                    int64_t max_partial_slots) {
  AttentionSplits out;
  const auto m = static_cast<int64_t>(positions.size());
  out.rows.assign(static_cast<size_t>(2 * m), 0);
  for (int64_t i = 0; i < m; ++i) out.rows[static_cast<size_t>(2 * i + 1)] = 1;
  // Prefill chunks: runs of fast rows of one sequence at consecutive positions, as tiles.
  std::vector<uint8_t> tiled(static_cast<size_t>(m), 0);
  for (int64_t begin = 0; begin < m;) {
    int64_t end = begin + 1;
    while (end < m && s[begin] == Schedule::kFast && s[end] == Schedule::kFast &&
           sequences[static_cast<size_t>(end)] == sequences[static_cast<size_t>(begin)] &&
           positions[static_cast<size_t>(end)] == positions[static_cast<size_t>(end - 1)] + 1) {
      ++end;
    }
    if (end - begin >= kMinTiledRun) {
      for (int64_t first = begin; first < end; first += kAttentionTileRows) {
        const int64_t rows = std::min<int64_t>(kAttentionTileRows, end - first);
        out.tiles.push_back(static_cast<int32_t>(first));
        out.tiles.push_back(static_cast<int32_t>(rows));
      }
      for (int64_t i = begin; i < end; ++i) {
        tiled[static_cast<size_t>(i)] = 1;
        out.rows[static_cast<size_t>(2 * i + 1)] = 0;
      }
    }
    begin = end;
  }
  AttentionShape shape;
  shape.window = window;
  auto length = [&](int64_t i) {
    const int32_t p = positions[static_cast<size_t>(i)];
    return p + 1 - shape.first_position(p);
  };
  auto split = [&](int64_t i, int64_t span) {
    const int64_t len = length(i);
    if (len <= span) return;
    const auto count = static_cast<int32_t>((len + span - 1) / span);
    out.rows[static_cast<size_t>(2 * i)] = static_cast<int32_t>(span);
    out.rows[static_cast<size_t>(2 * i + 1)] = count;
    out.max_spans = std::max(out.max_spans, count);
  };
  // Fixed rows: the schedule's split size, whatever the batch.
  for (int64_t i = 0; i < m; ++i) {
    if (s[i] == Schedule::kFixed) split(i, kFixedAttentionSpan);
  }
  auto splittable = [&](int64_t i) { return s[i] == Schedule::kFast && tiled[static_cast<size_t>(i)] == 0; };
  int64_t longest = 0;
  for (int64_t i = 0; i < m; ++i) {
    if (splittable(i)) longest = std::max(longest, length(i));
  }
  const int64_t blocks = m * n_head;
  if (longest > kMinAttentionSpan && blocks < device_blocks) {
    // Enough spans for the longest context to fill the device, each a multiple of 64 positions.
    const int64_t wanted = (device_blocks + blocks - 1) / blocks;
    const int64_t span = std::max<int64_t>(kMinAttentionSpan, ((longest + wanted - 1) / wanted + 63) / 64 * 64);
    for (int64_t i = 0; i < m; ++i) {
      if (splittable(i)) split(i, span);
    }
  }
  // Waves: as many rows as their partial states fit (one row at least).
  for (int64_t first = 0; first < m;) {
    int64_t end = first, most = 1;
    while (end < m) {
      const int64_t spans = std::max<int64_t>(most, out.rows[static_cast<size_t>(2 * end + 1)]);
      if (end > first && spans > 1 && (end + 1 - first) * spans > max_partial_slots) break;
      most = spans;
      ++end;
    }
    out.waves.push_back(static_cast<int32_t>(first));
    out.waves.push_back(static_cast<int32_t>(end - first));
    out.waves.push_back(static_cast<int32_t>(most));
    first = end;
  }
  return out;
}

}  // namespace llm42
