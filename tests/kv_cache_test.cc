// The paged KV cache's prefix caching alone (no model): what gets registered, what a new sequence
// maps, schedules, provisional rows, rollbacks and eviction. The engine-level guarantee (cache
// hits give the same bits as cold runs) is in determinism_test.
#include "lib/kv/kv_cache.h"

#include <numeric>
#include <vector>

#include "gtest/gtest.h"

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

}  // namespace
}  // namespace llm42
