// The flash-decoding split rule (lib/backend/attention_splits.h): fixed rows never split, so
// their bits are the one-block kernel's in any batch; fast rows split only when the batch leaves
// the device under-filled, into spans that tile each context exactly.
#include "lib/backend/attention_splits.h"

#include <vector>

#include "gtest/gtest.h"

namespace llm42 {
namespace {

constexpr int64_t kDeviceBlocks = 528;  // an H200's 132 SMs, four blocks each

// Every split row's spans cover its context: count - 1 full spans and a last one of 1..span
// positions; the span a multiple of 64 and at least kMinAttentionSpan.
void ExpectSpansTile(const AttentionSplits& a, std::span<const int32_t> positions, int64_t window) {
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
  const AttentionSplits a = PlanAttentionSplits(positions, Schedule::kFast, 0, 32, kDeviceBlocks);
  ExpectSpansTile(a, positions, 0);
  // 32 heads: 17 spans wanted; 8192 / 17 = 482 -> 512 positions, 16 spans.
  EXPECT_EQ(a.rows[0], 512);
  EXPECT_EQ(a.rows[1], 16);
  EXPECT_GE(32 * a.max_spans, kDeviceBlocks / 2) << "the device was meant to be filled";
}

TEST(AttentionSplits, FixedRowsNeverSplitInAnyBatch) {
  std::vector<int32_t> positions = {8191, 300, 5000, 17};
  std::vector<Schedule> mixed = {Schedule::kFixed, Schedule::kFast, Schedule::kFixed, Schedule::kFast};
  const AttentionSplits a = PlanAttentionSplits(positions, Schedules(mixed.data()), 0, 32, kDeviceBlocks);
  ExpectSpansTile(a, positions, 0);
  EXPECT_EQ(a.rows[1], 1);
  EXPECT_EQ(a.rows[5], 1);
  EXPECT_GT(a.rows[3], 1) << "the fast row of 301 positions was meant to split";
  EXPECT_EQ(a.rows[7], 1) << "17 positions are fewer than a span";
  const AttentionSplits fixed = PlanAttentionSplits(positions, Schedule::kFixed, 0, 32, kDeviceBlocks);
  EXPECT_EQ(fixed.max_spans, 1);
}

TEST(AttentionSplits, AFullBatchOrShortContextsDoNotSplit) {
  const std::vector<int32_t> many(17, 4000);  // 17 rows x 32 heads fill 528 blocks
  EXPECT_EQ(PlanAttentionSplits(many, Schedule::kFast, 0, 32, kDeviceBlocks).max_spans, 1);
  const std::vector<int32_t> short_ones = {100, 127};
  EXPECT_EQ(PlanAttentionSplits(short_ones, Schedule::kFast, 0, 32, kDeviceBlocks).max_spans, 1);
}

TEST(AttentionSplits, ASlidingWindowSplitsOnlyItsWindow) {
  const std::vector<int32_t> positions = {20000, 3000};
  const AttentionSplits a = PlanAttentionSplits(positions, Schedule::kFast, 4096, 8, kDeviceBlocks);
  ExpectSpansTile(a, positions, 4096);
  EXPECT_LE(int64_t{a.rows[0]} * a.rows[1], 4096 + a.rows[0]);
  // Without the window the first row's context is 20001 positions.
  const AttentionSplits whole = PlanAttentionSplits(positions, Schedule::kFast, 0, 8, kDeviceBlocks);
  ExpectSpansTile(whole, positions, 0);
  EXPECT_GT(int64_t{whole.rows[0]} * whole.rows[1], 20000);
}

}  // namespace
}  // namespace llm42
