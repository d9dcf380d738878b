// When a device records a step and when it replays it (lib/backend/step_recordings.h): a key's
// first step runs, its second is recorded, later ones replay; a refused key always runs; any
// change in the device's allocations drops every recording (they hold device addresses); a
// recording made while memory moved is never replayed; a full cache starts over. Every release
// happens exactly once.
#include "lib/backend/step_recordings.h"

#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace llm42 {
namespace {

using Action = StepRecordings::Action;

class StepRecordingsTest : public ::testing::Test {
 protected:
  // A fresh handle for each recording; released ones are counted and must not repeat.
  void* NewRecording() { return &handles_[next_++]; }
  void ReleaseOne(void* h) { EXPECT_TRUE(released_.insert(h).second) << "released twice"; }

  char handles_[64] = {};
  int next_ = 0;
  std::set<void*> released_;
  StepRecordings rec_{[this](void* h) { ReleaseOne(h); }, 4};
};

TEST_F(StepRecordingsTest, RunsOnceThenRecordsThenReplays) {
  const StepRecordings::Key a = {1, 0, 7}, b = {2, 0, 7};
  void* got = nullptr;
  EXPECT_EQ(rec_.Next(a, 5, &got), Action::kRun);
  EXPECT_EQ(rec_.Next(b, 5, &got), Action::kRun);
  EXPECT_EQ(rec_.Next(a, 5, &got), Action::kRecord);
  void* ra = NewRecording();
  EXPECT_TRUE(rec_.Recorded(a, ra, 5));
  for (int i = 0; i < 3; ++i) {
    got = nullptr;
    EXPECT_EQ(rec_.Next(a, 5, &got), Action::kReplay);
    EXPECT_EQ(got, ra);
  }
  EXPECT_EQ(rec_.Next(b, 5, &got), Action::kRecord) << "b's second step";
  EXPECT_TRUE(released_.empty());
}

TEST_F(StepRecordingsTest, ARefusedKeyAlwaysRuns) {
  const StepRecordings::Key a = {3};
  void* got = nullptr;
  EXPECT_EQ(rec_.Next(a, 0, &got), Action::kRun);
  EXPECT_EQ(rec_.Next(a, 0, &got), Action::kRecord);
  rec_.Refused(a);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(rec_.Next(a, 0, &got), Action::kRun);
}

// Fails when recordings survive a change in the allocations (checked: a stale graph would be
// replayed over freed buffers).
TEST_F(StepRecordingsTest, AllocationsChangedDropEveryRecording) {
  const StepRecordings::Key a = {1}, b = {2};
  void* got = nullptr;
  for (const auto& k : {a, b}) {
    rec_.Next(k, 1, &got);
    ASSERT_EQ(rec_.Next(k, 1, &got), Action::kRecord);
    rec_.Recorded(k, NewRecording(), 1);
  }
  EXPECT_EQ(rec_.size(), 2u);
  EXPECT_EQ(rec_.Next(a, 2, &got), Action::kRun) << "what moved memory may move it again: run first";
  EXPECT_EQ(released_.size(), 2u);
  EXPECT_EQ(rec_.size(), 0u);
  // Memory that moves while a step is recorded: that recording is released, never replayed.
  ASSERT_EQ(rec_.Next(a, 2, &got), Action::kRecord);
  void* moved = NewRecording();
  EXPECT_FALSE(rec_.Recorded(a, moved, 3));
  EXPECT_EQ(released_.count(moved), 1u);
  EXPECT_NE(rec_.Next(a, 3, &got), Action::kReplay);
}

TEST_F(StepRecordingsTest, AFullCacheStartsOver) {
  void* got = nullptr;
  for (int64_t k = 0; k < 5; ++k) {
    rec_.Next({k}, 0, &got);
    ASSERT_EQ(rec_.Next({k}, 0, &got), Action::kRecord);
    rec_.Recorded({k}, NewRecording(), 0);
  }
  EXPECT_EQ(released_.size(), 4u) << "the fifth recording clears the first four";
  EXPECT_EQ(rec_.Next({4}, 0, &got), Action::kReplay);
  EXPECT_NE(rec_.Next({0}, 0, &got), Action::kReplay);
}

TEST_F(StepRecordingsTest, DestructionReleasesWhatIsHeld) {
  {
    StepRecordings own([this](void* h) { ReleaseOne(h); });
    void* got = nullptr;
    own.Next({9}, 0, &got);
    own.Next({9}, 0, &got);
    own.Recorded({9}, NewRecording(), 0);
  }
  EXPECT_EQ(released_.size(), 1u);
}

// Every m up to the most a bucket holds runs as the least bucket that holds it; past it, as m.
TEST(StepRowBucket, TheLeastBucketThatHoldsTheRows) {
  const std::vector<int64_t> buckets = {1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64, 96, 128, 160, 192, 224, 256};
  for (int64_t m = 1; m <= 256; ++m) {
    int64_t least = 0;
    for (int64_t b : buckets) {
      if (b >= m) {
        least = b;
        break;
      }
    }
    EXPECT_EQ(StepRowBucket(m, 256), least) << m;
  }
  EXPECT_EQ(StepRowBucket(257, 256), 257);
  EXPECT_EQ(StepRowBucket(250, 250), 250) << "never past the most";
  EXPECT_EQ(StepRowBucket(0, 256), 0);
}

}  // namespace
}  // namespace llm42
