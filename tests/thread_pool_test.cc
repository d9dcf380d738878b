#include "lib/util/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

namespace llm42 {
namespace {

using Chunks = std::vector<std::pair<int64_t, int64_t>>;

// The chunks a run hands out, sorted by start.
template <typename Run>
Chunks ChunksOf(Run run) {
  std::mutex mu;
  Chunks chunks;
  run([&](int64_t begin, int64_t end) {
    std::lock_guard<std::mutex> lock(mu);
    chunks.emplace_back(begin, end);
  });
  std::sort(chunks.begin(), chunks.end());
  return chunks;
}

// Every item of [0, n) in exactly one non-empty chunk.
void ExpectTiles(const Chunks& chunks, int64_t n) {
  ASSERT_FALSE(chunks.empty());
  EXPECT_EQ(chunks.front().first, 0);
  EXPECT_EQ(chunks.back().second, n);
  for (size_t i = 0; i < chunks.size(); ++i) {
    EXPECT_LT(chunks[i].first, chunks[i].second) << "chunk " << i;
    if (i > 0) {
      EXPECT_EQ(chunks[i].first, chunks[i - 1].second) << "chunk " << i;
    }
  }
}

TEST(ThreadPool, ParallelForCoversEveryItemOnceInChunksOfTheGrain) {
  ThreadPool pool(3);
  const Chunks chunks = ChunksOf([&](auto fn) { pool.ParallelFor(1000, 64, fn); });
  ExpectTiles(chunks, 1000);
  for (size_t i = 0; i + 1 < chunks.size(); ++i) EXPECT_EQ(chunks[i].second - chunks[i].first, 64);
}

// Guided chunks: aligned, at least the minimum, shrinking towards the end, and the same
// boundaries on every run whatever thread takes which chunk. Fails when a chunk's size depends on
// anything but its start (each grab a fetch_add of a size computed from the position read just
// before, tried: the boundaries differ from run to run) and when the sizes do not shrink (a
// fixed grain, tried).
TEST(ThreadPool, GuidedChunksAreAlignedShrinkAndDependOnlyOnTheirStart) {
  for (int threads : {2, 3, 4}) {
    ThreadPool pool(threads);
    const int64_t n = 4096 + 48, min_grain = 32, align = 16;
    const Chunks first = ChunksOf([&](auto fn) { pool.ParallelForGuided(n, min_grain, align, fn); });
    ExpectTiles(first, n);
    for (size_t i = 0; i < first.size(); ++i) {
      const int64_t size = first[i].second - first[i].first;
      if (first[i].second == n) continue;  // the last chunk takes what is left
      EXPECT_EQ(size % align, 0) << "chunk " << i;
      EXPECT_GE(size, min_grain) << "chunk " << i;
      // A (2 x threads)th of what was left, rounded up to the alignment.
      EXPECT_GE(size * 2 * threads, n - first[i].first) << "chunk " << i;
    }
    ASSERT_GE(first.size(), 3u) << threads;
    const auto size = [&](size_t i) { return first[i].second - first[i].first; };
    EXPECT_GT(size(0), size(first.size() - 2));
    for (int run = 0; run < 20; ++run) {
      EXPECT_EQ(ChunksOf([&](auto fn) { pool.ParallelForGuided(n, min_grain, align, fn); }), first) << run;
    }
  }
}

TEST(ThreadPool, GuidedRunsSmallWorkInOneChunk) {
  ThreadPool pool(2);
  EXPECT_EQ(ChunksOf([&](auto fn) { pool.ParallelForGuided(20, 32, 16, fn); }), (Chunks{{0, 20}}));
  EXPECT_TRUE(ChunksOf([&](auto fn) { pool.ParallelForGuided(0, 32, 16, fn); }).empty());
  ThreadPool one(1);
  EXPECT_EQ(ChunksOf([&](auto fn) { one.ParallelForGuided(1000, 32, 16, fn); }), (Chunks{{0, 1000}}));
}

}  // namespace
}  // namespace llm42
