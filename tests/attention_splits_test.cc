// The attention plan (lib/backend/attention_splits.h): fixed rows split by the schedule's span
// size alone and never join a tile, so their bits are the same in any batch; fast prefill chunks
// run as query tiles; other fast rows split only when the batch leaves the device under-filled,
// into spans that cover each context exactly; waves bound the partial states' room.
#include "lib/backend/attention_splits.h"

#include <algorithm>
#include <vector>

#include "gtest/gtest.h"

namespace llm42 {
namespace {

constexpr int64_t kDeviceBlocks = 528;  // an H200's 132 SMs, four blocks each

// Each row a sequence of its own.
std::vector<const void*> Alone(size_t rows) {
  static const char kSequences[64] = {};
  std::vector<const void*> out;
  for (size_t i = 0; i < rows; ++i) out.push_back(kSequences + i);
  return out;
}

constexpr int64_t kRoomy = int64_t{1} << 30;  // partial-state slots enough for one wave

AttentionSplits Plan(const std::vector<int32_t>& positions, Schedules s, int64_t window, int64_t n_head,
                     int64_t slots = kRoomy) {
  return PlanAttentionSplits(positions, Alone(positions.size()), s, window, n_head, kDeviceBlocks, slots);
}

// Every split row's spans cover its context: count - 1 full spans and a last one of 1..span
// positions; the span a multiple of 64 and at least kMinAttentionSpan. The waves take every row
// once, in order, each with its rows' most spans.
void ExpectSpansTile(const AttentionSplits& a, std::span<const int32_t> positions, int64_t window) {
  int64_t next = 0;
  for (size_t w = 0; w + 2 < a.waves.size(); w += 3) {
    EXPECT_EQ(a.waves[w], next) << "wave " << w / 3;
    EXPECT_GE(a.waves[w + 1], 1) << "wave " << w / 3;
    int32_t wave_most = 1;
    for (int32_t r = a.waves[w]; r < a.waves[w] + a.waves[w + 1]; ++r) wave_most = std::max(wave_most, a.rows[2 * r + 1]);
    EXPECT_EQ(a.waves[w + 2], wave_most) << "wave " << w / 3;
    next += a.waves[w + 1];
  }
  EXPECT_EQ(a.waves.size() % 3, 0u);
  EXPECT_EQ(next, static_cast<int64_t>(positions.size())) << "the waves must cover the batch";
  int32_t most = 1;
  for (size_t i = 0; i < positions.size(); ++i) {
    const int32_t span = a.rows[2 * i], count = a.rows[2 * i + 1];
    const int64_t len = window > 0 ? std::min<int64_t>(positions[i] + 1, window) : positions[i] + 1;
    most = std::max(most, count);
    if (count == 1) {
      EXPECT_EQ(span, 0) << "row " << i;
      continue;
    }
    EXPECT_EQ(span % 64, 0) << "row " << i;
    EXPECT_GE(span, kMinAttentionSpan) << "row " << i;
    const int64_t last = len - int64_t{span} * (count - 1);
    EXPECT_GE(last, 1) << "row " << i;
    EXPECT_LE(last, span) << "row " << i;
  }
  EXPECT_EQ(a.max_spans, most);
}

TEST(AttentionSplits, OneLongRowSplitsToFillTheDevice) {
  const std::vector<int32_t> positions = {8191};
  const AttentionSplits a = Plan(positions, Schedule::kFast, 0, 32);
  ExpectSpansTile(a, positions, 0);
  // 32 heads: 17 spans wanted; 8192 / 17 = 482 -> 512 positions, 16 spans.
  EXPECT_EQ(a.rows[0], 512);
  EXPECT_EQ(a.rows[1], 16);
  EXPECT_GE(32 * a.max_spans, kDeviceBlocks / 2) << "the device was meant to be filled";
}

// A fixed row's spans are kFixedAttentionSpan positions from its context's start, whatever the
// batch: alone, beside fast rows that split to fill the device, in a batch that fills it, under
// a sliding window, and in a wave of its own. Fails when the fixed rows split like the fast rows
// beside them (checked).
TEST(AttentionSplits, FixedRowsSplitByTheirOwnContextInAnyBatch) {
  const std::vector<int32_t> positions = {8191, 300, 5000, 17, 255, 256};
  const std::vector<Schedule> mixed = {Schedule::kFixed, Schedule::kFast,  Schedule::kFixed,
                                       Schedule::kFast,  Schedule::kFixed, Schedule::kFixed};
  auto expect_own = [](const AttentionSplits& a, size_t row, int32_t position, int64_t window) {
    const int64_t len = window > 0 ? std::min<int64_t>(position + 1, window) : position + 1;
    const int32_t count = static_cast<int32_t>((len + kFixedAttentionSpan - 1) / kFixedAttentionSpan);
    EXPECT_EQ(a.rows[2 * row + 1], count) << "position " << position;
    EXPECT_EQ(a.rows[2 * row], count > 1 ? kFixedAttentionSpan : 0) << "position " << position;
  };
  const AttentionSplits a = Plan(positions, Schedules(mixed.data()), 0, 32);
  ExpectSpansTile(a, positions, 0);
  EXPECT_GT(a.rows[3], 1) << "the fast row of 301 positions was meant to split";
  EXPECT_NE(a.rows[2], kFixedAttentionSpan) << "the fast row's span was meant to fill the device";
  EXPECT_EQ(a.rows[7], 1) << "17 positions are fewer than a span";
  for (size_t i : {0u, 2u, 4u, 5u}) {
    expect_own(a, i, positions[i], 0);
    const std::vector<int32_t> alone = {positions[i]};
    expect_own(Plan(alone, Schedule::kFixed, 0, 32), 0, positions[i], 0);
    const std::vector<int32_t> full(40, positions[i]);  // 40 x 32 blocks fill the device
    const AttentionSplits many = Plan(full, Schedule::kFixed, 0, 32);
    for (size_t r = 0; r < full.size(); ++r) expect_own(many, r, positions[i], 0);
    expect_own(Plan(alone, Schedule::kFixed, 4096, 32), 0, positions[i], 4096);
  }
  EXPECT_EQ(a.max_spans, 32);
  const AttentionSplits one_wave_each = Plan(positions, Schedules(mixed.data()), 0, 32, 1);
  ExpectSpansTile(one_wave_each, positions, 0);
  EXPECT_EQ(one_wave_each.rows, a.rows) << "waves must not change a row's spans";
}

// Waves hold at most `slots` (row, span) partial states (rows x their most spans), a row too
// long for the room alone in its wave; rows that do not split share any wave.
TEST(AttentionSplits, WavesFitTheirRoom) {
  std::vector<int32_t> positions;
  for (int i = 0; i < 300; ++i) positions.push_back(i * 37 % 4000);
  for (int64_t slots : {int64_t{1}, int64_t{16}, int64_t{100}, int64_t{1000}, kRoomy}) {
    const AttentionSplits a = Plan(positions, Schedule::kFixed, 0, 32, slots);
    ExpectSpansTile(a, positions, 0);
    for (size_t w = 0; w < a.waves.size(); w += 3) {
      if (a.waves[w + 1] > 1 && a.waves[w + 2] > 1) {
        EXPECT_LE(int64_t{a.waves[w + 1]} * a.waves[w + 2], slots) << "wave " << w / 3 << " of room " << slots;
      }
    }
    if (slots == kRoomy) {
      EXPECT_EQ(a.waves.size(), 3u);
    }
    if (slots == 16) {
      EXPECT_GT(a.waves.size(), 3u * 10);
    }
  }
  const std::vector<int32_t> short_ones(500, 100);
  EXPECT_EQ(Plan(short_ones, Schedule::kFixed, 0, 32, 1).waves, (std::vector<int32_t>{0, 500, 1}));
}

TEST(AttentionSplits, AFullBatchOrShortContextsDoNotSplit) {
  const std::vector<int32_t> many(17, 4000);  // 17 rows x 32 heads fill 528 blocks
  EXPECT_EQ(Plan(many, Schedule::kFast, 0, 32).max_spans, 1);
  const std::vector<int32_t> short_ones = {100, 127};
  EXPECT_EQ(Plan(short_ones, Schedule::kFast, 0, 32).max_spans, 1);
}

TEST(AttentionSplits, ASlidingWindowSplitsOnlyItsWindow) {
  const std::vector<int32_t> positions = {20000, 3000};
  const AttentionSplits a = Plan(positions, Schedule::kFast, 4096, 8);
  ExpectSpansTile(a, positions, 4096);
  EXPECT_LE(int64_t{a.rows[0]} * a.rows[1], 4096 + a.rows[0]);
  // Without the window the first row's context is 20001 positions.
  const AttentionSplits whole = Plan(positions, Schedule::kFast, 0, 8);
  ExpectSpansTile(whole, positions, 0);
  EXPECT_GT(int64_t{whole.rows[0]} * whole.rows[1], 20000);
}

// A fast prefill chunk of 70 rows runs as tiles of 32, 32 and 6 rows; five consecutive rows are
// too few for a tile, a fixed chunk never tiles, and a row of another sequence or a gap in the
// positions ends a run.
TEST(AttentionSplits, FastPrefillChunksRunAsQueryTiles) {
  const char a = 0, b = 0, c = 0, d = 0;
  std::vector<int32_t> positions;
  std::vector<const void*> sequences;
  std::vector<Schedule> schedules;
  auto add = [&](const char* seq, int32_t first, int32_t n, Schedule sc) {
    for (int32_t p = first; p < first + n; ++p) {
      positions.push_back(p);
      sequences.push_back(seq);
      schedules.push_back(sc);
    }
  };
  add(&a, 100, 70, Schedule::kFast);   // rows 0..69
  add(&b, 400, 1, Schedule::kFast);    // 70: a decode row
  add(&c, 0, 5, Schedule::kFast);      // 71..75
  add(&d, 0, 10, Schedule::kFixed);    // 76..85
  add(&a, 300, 9, Schedule::kFast);    // 86..94: another chunk of the first sequence
  const AttentionSplits p =
      PlanAttentionSplits(positions, sequences, Schedules(schedules.data()), 0, 32, kDeviceBlocks, kRoomy);
  EXPECT_EQ(p.tiles, (std::vector<int32_t>{0, 32, 32, 32, 64, 6, 86, 9}));
  for (size_t i = 0; i < positions.size(); ++i) {
    const bool in_tile = i < 70 || i >= 86;
    EXPECT_EQ(p.rows[2 * i + 1] == 0, in_tile) << "row " << i;
  }
  // The others run alone, unsplit: 95 rows of 32 heads fill the device.
  EXPECT_EQ(p.rows[2 * 70 + 1], 1);
  EXPECT_EQ(p.max_spans, 1);
  for (size_t i = 76; i < 86; ++i) EXPECT_EQ(p.rows[2 * i + 1], 1) << "fixed row " << i;
  EXPECT_EQ(p.waves, (std::vector<int32_t>{0, 95, 1}));
}

}  // namespace
}  // namespace llm42
