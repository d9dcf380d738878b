// The paged KV cache's prefix caching alone (no model): what gets registered, what a new sequence
// maps, schedules, provisional rows, rollbacks and eviction; and the release of blocks behind
// sliding windows; copying a prefix's blocks out and into another cache (prefix_blocks.h).
// The engine-level guarantee (cache
// hits give the same bits as cold runs) is in determinism_test.
#include "lib/kv/kv_cache.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <span>
#include <vector>

#include "gtest/gtest.h"
#include "lib/kv/prefix_blocks.h"

namespace llm42 {
namespace {

std::vector<int32_t> Tokens(int n, int salt = 0) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = 100 + i + 1000 * salt;
  return t;
}

// A sequence that held `tokens`, every row written as told, then freed.
void WriteAndFree(KvCache& c, const std::vector<int32_t>& tokens, bool fixed, bool provisional = false) {
  const int32_t s = c.Create();
  ASSERT_TRUE(c.Reserve(s, static_cast<int64_t>(tokens.size())));
  for (size_t p = 0; p < tokens.size(); ++p) c.NoteWritten(s, static_cast<int64_t>(p), tokens[p], fixed, provisional);
  c.Free(s);
}

int64_t Map(KvCache& c, const std::vector<int32_t>& tokens, bool fixed_only, int32_t* seq = nullptr) {
  const int32_t s = c.Create();
  const int64_t n = c.MapCachedPrefix(s, tokens, static_cast<int64_t>(tokens.size()) - 1, fixed_only);
  if (seq != nullptr) {
    *seq = s;
  } else {
    c.Free(s);
  }
  return n;
}

TEST(PrefixCache, FullBlocksOfAFinishedSequenceAreMappedByContent) {
  KvCache c(16, 16);
  WriteAndFree(c, Tokens(40), /*fixed=*/true);
  EXPECT_EQ(c.free_blocks(), 16);        // cached blocks still count as room
  EXPECT_EQ(c.cached_idle_blocks(), 2);  // two full blocks; the partial third is free
  EXPECT_EQ(Map(c, Tokens(40), true), 32);
  EXPECT_EQ(Map(c, Tokens(33), true), 32);
  EXPECT_EQ(Map(c, Tokens(32), true), 16);  // the last token is always left to compute
  std::vector<int32_t> other = Tokens(40);
  other[20] = 7;  // differs in the second block
  EXPECT_EQ(Map(c, other, true), 16);
  other[3] = 7;
  EXPECT_EQ(Map(c, other, true), 0);
  EXPECT_EQ(Map(c, Tokens(40, 1), true), 0);
}

// Recurrent-state snapshots (a model with recurrent layers): a prefix maps only up to its last block
// whose snapshot is valid; a snapshot is valid once its block's last row wrote it, gone when that
// row is rewritten without one or truncated; a full pool takes the least recently used idle
// block's; a block freed unregistered gives its id back.
TEST(PrefixCache, SnapshotsBoundWhatAPrefixMaps) {
  KvCache c(8, 4);
  c.EnableSnapshots(2);
  ASSERT_EQ(c.n_snapshots(), 2);
  auto write = [&](int32_t s, const std::vector<int32_t>& t, int64_t from, int64_t to, bool snapshots) {
    for (int64_t p = from; p < to; ++p) {
      const int32_t id = snapshots ? c.SnapshotAt(s, p) : -1;
      EXPECT_EQ(id >= 0, snapshots && p % 4 == 3 && id >= 0);
      c.NoteWritten(s, p, t[static_cast<size_t>(p)], true, false, id >= 0);
    }
  };
  const std::vector<int32_t> t = Tokens(12);
  int32_t s = c.Create();
  ASSERT_TRUE(c.Reserve(s, 12));
  write(s, t, 0, 8, true);    // blocks 0 and 1 with snapshots (the pool's two)
  write(s, t, 8, 12, true);   // block 2: the pool is empty and no idle block holds one
  EXPECT_GE(c.SnapshotBefore(s, 4), 0);
  EXPECT_GE(c.SnapshotBefore(s, 8), 0);
  EXPECT_EQ(c.SnapshotBefore(s, 12), -1);
  EXPECT_EQ(c.SnapshotBefore(s, 6), -1);  // not a block boundary
  c.Free(s);
  EXPECT_EQ(Map(c, Tokens(13), true), 8);  // three blocks cached, the third without a snapshot
  // A rewrite of a block's last row without a snapshot drops it; the prefix maps one block less.
  s = c.Create();
  ASSERT_EQ(c.MapCachedPrefix(s, t, 4, true), 4);
  ASSERT_TRUE(c.Reserve(s, 8));
  const std::vector<int32_t> other = {100, 101, 102, 103, 7, 7, 7, 7};
  write(s, other, 4, 8, false);
  EXPECT_EQ(c.SnapshotBefore(s, 8), -1);
  // Truncating into a block drops its snapshot; a full pool takes an idle block's.
  write(s, other, 4, 8, true);
  const int32_t kept = c.SnapshotBefore(s, 8);
  EXPECT_GE(kept, 0) << "an idle block's snapshot was to be taken";
  c.Truncate(s, 6);
  EXPECT_EQ(c.SnapshotBefore(s, 8), -1);
  c.Free(s);
}

TEST(PrefixCache, DeterministicLookupsTakeOnlyFixedBlocks) {
  KvCache c(16, 16);
  WriteAndFree(c, Tokens(40), /*fixed=*/false);
  EXPECT_EQ(Map(c, Tokens(40), /*fixed_only=*/true), 0);
  EXPECT_EQ(Map(c, Tokens(40), /*fixed_only=*/false), 32);
  WriteAndFree(c, Tokens(40), /*fixed=*/true);  // now a fixed copy too
  EXPECT_EQ(Map(c, Tokens(40), true), 32);
}

TEST(PrefixCache, ProvisionalRowsAreCachedOnlyOnceRewrittenUnderFixed) {
  KvCache c(16, 16);
  const std::vector<int32_t> t = Tokens(40);
  const int32_t s = c.Create();
  ASSERT_TRUE(c.Reserve(s, 40));
  for (int64_t p = 0; p < 40; ++p) c.NoteWritten(s, p, t[static_cast<size_t>(p)], /*fixed=*/p < 10, /*provisional=*/p >= 10);
  EXPECT_EQ(Map(c, t, false), 0);  // block 0 holds candidates
  for (int64_t p = 10; p < 40; ++p) c.NoteWritten(s, p, t[static_cast<size_t>(p)], true, false);  // verified
  EXPECT_EQ(Map(c, t, true), 32);
  // A rollback into block 1 rewrites it: it is no longer cached under its old content.
  c.Truncate(s, 20);
  EXPECT_EQ(Map(c, t, true), 16);
  c.Free(s);
}

TEST(PrefixCache, HeldBlocksAreNeverEvictedAndIdleOnesGoLeastRecentFirst) {
  KvCache c(4, 16);
  WriteAndFree(c, Tokens(33, 0), true);  // 2 cached blocks (A)
  WriteAndFree(c, Tokens(17, 1), true);  // 1 cached block (B), more recent
  EXPECT_EQ(c.cached_idle_blocks(), 3);
  int32_t holder;
  ASSERT_EQ(Map(c, Tokens(33, 0), true, &holder), 32);  // A held
  EXPECT_EQ(c.free_blocks(), 2);
  const int32_t s = c.Create();
  EXPECT_FALSE(c.Reserve(s, 3 * 16));  // only 2 blocks may go: A is held
  EXPECT_TRUE(c.Reserve(s, 2 * 16));   // the never-used one, then B
  EXPECT_EQ(c.evictions(), 1);
  EXPECT_EQ(Map(c, Tokens(17, 1), true), 0);  // B is gone
  c.Free(s);
  c.Free(holder);
  EXPECT_EQ(Map(c, Tokens(33, 0), true), 32);  // A survived
}

TEST(PrefixCache, ABlockIsReachableOnlyThroughTheContentBeforeIt) {
  KvCache c(16, 16);
  WriteAndFree(c, Tokens(40), true);
  // The same second block after a different first block is not a hit.
  std::vector<int32_t> t = Tokens(40);
  t[0] = 9;
  EXPECT_EQ(Map(c, t, false), 0);
}

TEST(PrefixCache, DisabledCachesNothing) {
  KvCache c(16, 16, /*prefix_caching=*/false);
  WriteAndFree(c, Tokens(40), true);
  EXPECT_EQ(c.cached_idle_blocks(), 0);
  EXPECT_EQ(Map(c, Tokens(40), false), 0);
}

// A sequence holding `tokens`, every row written under fixed.
int32_t Held(KvCache& c, const std::vector<int32_t>& tokens) {
  const int32_t s = c.Create();
  EXPECT_TRUE(c.Reserve(s, static_cast<int64_t>(tokens.size())));
  for (size_t p = 0; p < tokens.size(); ++p) c.NoteWritten(s, static_cast<int64_t>(p), tokens[p], true, false);
  return s;
}

// Sliding windows (KvCache::ReleaseBefore): the blocks wholly before the position go back to the
// pool, the last block of the table always stays, the table keeps their places, and the rest of
// the cache's bookkeeping (reserving, truncating, freeing) steps over them.
TEST(SlidingWindow, BlocksBehindAPositionAreReleasedAndTheLastKept) {
  KvCache c(8, 16);
  const std::vector<int32_t> t = Tokens(64);
  const int32_t s = Held(c, t);
  EXPECT_EQ(c.free_blocks(), 4);
  EXPECT_EQ(c.ReleaseBefore(s, 40), 2);  // blocks 0 and 1; block 2 holds position 40
  EXPECT_EQ(c.block_table(s)[0], KvCache::kReleased);
  EXPECT_EQ(c.block_table(s)[1], KvCache::kReleased);
  EXPECT_NE(c.block_table(s)[2], KvCache::kReleased);
  EXPECT_EQ(c.ReleaseBefore(s, 47), 0);  // nothing more lies wholly before it
  EXPECT_EQ(c.free_blocks(), 6);
  EXPECT_EQ(c.ReleaseBefore(s, 1000), 1);  // block 2; block 3, the last, stays
  EXPECT_EQ(c.released_blocks(s), 3);
  EXPECT_EQ(c.window_releases(), 3);
  EXPECT_EQ(c.reserved_positions(s), 64);  // positions keep their blocks' numbering
  ASSERT_TRUE(c.Reserve(s, 80));
  EXPECT_EQ(c.free_blocks(), 6);
  c.Truncate(s, 70);
  EXPECT_EQ(c.reserved_positions(s), 80);
  c.Truncate(s, 20);  // into the released blocks (never done by the engine): only held ones return
  EXPECT_EQ(c.free_blocks(), 8);
  c.Free(s);
  EXPECT_EQ(c.free_blocks(), 8);
  const int32_t again = c.Create();  // the id is reused with nothing released
  EXPECT_EQ(again, s);
  EXPECT_EQ(c.released_blocks(again), 0);
  c.Free(again);
}

// A released block is one no sequence holds: cached, it still serves a new sequence's prefix.
TEST(SlidingWindow, ReleasedBlocksStayCachedForOtherSequences) {
  KvCache c(8, 16);
  const std::vector<int32_t> t = Tokens(64);
  const int32_t s = Held(c, t);
  ASSERT_EQ(c.ReleaseBefore(s, 48), 3);
  EXPECT_EQ(c.cached_idle_blocks(), 3);
  EXPECT_EQ(Map(c, t, true), 48);
  c.Free(s);
}

// The block after a released one keeps the content it was computed against: once another
// sequence has taken the released block and written other tokens into it, the sequence's next
// rows must not register its block as following that new content. Checked to fail when
// ReleaseBefore does not freeze the next block's parent (the mixed prefix then maps 32).
TEST(SlidingWindow, ABlockAfterAReleasedOneIsNeverCachedAgainstNewContent) {
  KvCache c(2, 16);
  const std::vector<int32_t> t = Tokens(40);
  const int32_t s = c.Create();
  ASSERT_TRUE(c.Reserve(s, 32));
  for (int64_t p = 0; p < 24; ++p) c.NoteWritten(s, p, t[static_cast<size_t>(p)], true, false);
  ASSERT_EQ(c.ReleaseBefore(s, 20), 1);
  const int32_t other = c.Create();
  const std::vector<int32_t> u = Tokens(16, 1);
  ASSERT_TRUE(c.Reserve(other, 16));  // evicts the released block
  EXPECT_EQ(c.evictions(), 1);
  for (int64_t p = 0; p < 16; ++p) c.NoteWritten(other, p, u[static_cast<size_t>(p)], true, false);
  for (int64_t p = 24; p < 32; ++p) c.NoteWritten(s, p, t[static_cast<size_t>(p)], true, false);
  std::vector<int32_t> mixed = u;
  mixed.insert(mixed.end(), t.begin() + 16, t.end());
  c.Free(other);
  EXPECT_EQ(Map(c, mixed, true), 16);
  EXPECT_EQ(Map(c, t, true), 0);
  c.Free(s);
}

// Storage for the copies: a block's bytes are a function of its id in the source cache, so a
// block read from the wrong id, or written to the wrong place, shows.
struct FakeStorage {
  size_t block_bytes = 8;
  std::map<int32_t, std::vector<uint8_t>> blocks;
  ReadKvBlockFn Reader() {
    return [this](int32_t id, std::span<uint8_t> out) {
      for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(id * 16 + static_cast<int32_t>(i));
      return absl::OkStatus();
    };
  }
  WriteKvBlockFn Writer() {
    return [this](int32_t id, std::span<const uint8_t> in) {
      blocks[id].assign(in.begin(), in.end());
      return absl::OkStatus();
    };
  }
};

TEST(PrefixBlocks, CopiedOutBlocksMapInAnotherCacheUnderTheirSchedule) {
  KvCache source(16, 16);
  WriteAndFree(source, Tokens(40), /*fixed=*/true);
  const std::vector<int32_t> other_tokens = Tokens(20, 1);
  WriteAndFree(source, other_tokens, /*fixed=*/false);
  FakeStorage storage;
  absl::StatusOr<PrefixBlocks> out = CopyCachedPrefixOut(source, Tokens(40), storage.block_bytes, storage.Reader());
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->fixed, (std::vector<uint8_t>{1, 1}));  // the two full blocks, the partial one not
  ASSERT_EQ(out->kv.size(), 2 * storage.block_bytes);
  EXPECT_EQ(source.cached_idle_blocks(), 3);  // released again after the copy
  absl::StatusOr<PrefixBlocks> plain = CopyCachedPrefixOut(source, other_tokens, storage.block_bytes, storage.Reader());
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->fixed, (std::vector<uint8_t>{0}));

  KvCache target(8, 16);
  ASSERT_TRUE(CopyPrefixIn(target, Tokens(40), storage.block_bytes, *out, storage.Writer()).ok());
  EXPECT_EQ(target.cached_idle_blocks(), 2);
  EXPECT_EQ(Map(target, Tokens(40), /*fixed_only=*/true), 32);  // fixed blocks serve deterministic requests
  // The bytes landed in the blocks the target's table maps, in order.
  int32_t seq = -1;
  ASSERT_EQ(Map(target, Tokens(40), true, &seq), 32);
  for (int b = 0; b < 2; ++b) {
    const std::vector<uint8_t>& got = storage.blocks[target.block_table(seq)[b]];
    EXPECT_TRUE(std::equal(got.begin(), got.end(), out->kv.begin() + b * static_cast<int64_t>(storage.block_bytes)));
  }
  target.Free(seq);
  ASSERT_TRUE(CopyPrefixIn(target, other_tokens, storage.block_bytes, *plain, storage.Writer()).ok());
  EXPECT_EQ(Map(target, other_tokens, /*fixed_only=*/true), 0);  // fast blocks do not
  EXPECT_EQ(Map(target, other_tokens, /*fixed_only=*/false), 16);
}

TEST(PrefixBlocks, APoolTooSmallOrSizesThatDisagreeAreRefusedAndLeaveNothingHeld) {
  KvCache source(16, 16);
  WriteAndFree(source, Tokens(64), true);
  FakeStorage storage;
  absl::StatusOr<PrefixBlocks> out = CopyCachedPrefixOut(source, Tokens(64), storage.block_bytes, storage.Reader());
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->fixed.size(), 4u);
  KvCache small(3, 16);
  const absl::Status st = CopyPrefixIn(small, Tokens(64), storage.block_bytes, *out, storage.Writer());
  EXPECT_TRUE(absl::IsResourceExhausted(st)) << st;
  EXPECT_EQ(small.free_blocks(), 3);
  EXPECT_TRUE(storage.blocks.empty());
  KvCache target(8, 16);
  EXPECT_TRUE(absl::IsInvalidArgument(CopyPrefixIn(target, Tokens(40), storage.block_bytes, *out, storage.Writer())));
  PrefixBlocks torn = *out;
  torn.kv.pop_back();
  EXPECT_TRUE(absl::IsInvalidArgument(CopyPrefixIn(target, Tokens(64), storage.block_bytes, torn, storage.Writer())));
  EXPECT_EQ(target.cached_idle_blocks(), 0);
  // A failed write is returned, and the sequence it used is released.
  const absl::Status bad = CopyPrefixIn(target, Tokens(64), storage.block_bytes, *out,
                                        [](int32_t, std::span<const uint8_t>) { return absl::DataLossError("device"); });
  EXPECT_TRUE(absl::IsDataLoss(bad)) << bad;
  EXPECT_EQ(target.free_blocks(), 8);
}

}  // namespace
}  // namespace llm42
