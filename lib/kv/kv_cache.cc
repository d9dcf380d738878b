#include "lib/kv/kv_cache.h"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <iterator>

#include "lib/util/stable_hash.h"

namespace llm42 {

KvCache::KvCache(int64_t n_blocks, int32_t block_size, bool prefix_caching)
    : n_blocks_(n_blocks),
      block_size_(block_size),
      prefix_caching_(prefix_caching),
      blocks_(static_cast<size_t>(n_blocks)),
      tokens_(static_cast<size_t>(n_blocks * block_size), 0) {
  if (block_size < 1 || block_size > 64) std::abort();  // one bit per position in a uint64_t
  free_.reserve(static_cast<size_t>(n_blocks));
  for (int64_t b = n_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
}

int32_t KvCache::Create() {
  if (!free_seqs_.empty()) {
    const int32_t s = free_seqs_.back();
    free_seqs_.pop_back();
    return s;
  }
  tables_.emplace_back();
  released_.push_back(0);
  return static_cast<int32_t>(tables_.size() - 1);
}

void KvCache::Free(int32_t seq) {
  Truncate(seq, 0);
  released_[static_cast<size_t>(seq)] = 0;
  free_seqs_.push_back(seq);
}

uint64_t KvCache::HashTokens(const int32_t* tokens) const {
  return StableHash().Mix(tokens, static_cast<size_t>(block_size_) * sizeof(int32_t)).value();
}

// A never-used block, else the least recently used idle cached one (evicted).
int32_t KvCache::TakeBlock() {
  int32_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else {
    b = lru_.front();
    lru_.pop_front();
    Unregister(b);
    ++evictions_;
  }
  DropSnapshot(b);
  Block& blk = blocks_[static_cast<size_t>(b)];
  ++blk.gen;
  blk.refs = 1;
  blk.parent = -1;
  blk.parent_gen = 0;
  blk.parent_frozen = false;
  blk.written = blk.not_fixed = blk.provisional = 0;
  return b;
}

void KvCache::Release(int32_t b) {
  Block& blk = blocks_[static_cast<size_t>(b)];
  if (--blk.refs > 0) return;
  if (blk.registered) {
    lru_.push_back(b);
    blk.lru = std::prev(lru_.end());
  } else {
    DropSnapshot(b);  // nothing can map it: its snapshot id goes back to the pool now
    free_.push_back(b);
  }
}

// Removes `b` from the registry (the caller has taken it off the LRU list or holds it).
void KvCache::Unregister(int32_t b) {
  Block& blk = blocks_[static_cast<size_t>(b)];
  if (!blk.registered) return;
  registry_.erase(blk.key);
  blk.registered = false;
}

void KvCache::Changed(int32_t b) {
  Unregister(b);
  ++blocks_[static_cast<size_t>(b)].gen;
}

void KvCache::DropSnapshot(int32_t b) {
  Block& blk = blocks_[static_cast<size_t>(b)];
  if (blk.snapshot >= 0) free_snapshots_.push_back(blk.snapshot);
  blk.snapshot = -1;
  blk.snapshot_valid = false;
}

void KvCache::EnableSnapshots(int64_t n) {
  n_snapshots_ = prefix_caching_ ? n : 0;
  free_snapshots_.clear();
  for (int64_t i = n_snapshots_ - 1; i >= 0; --i) free_snapshots_.push_back(static_cast<int32_t>(i));
}

int32_t KvCache::SnapshotAt(int32_t seq, int64_t position) {
  if (n_snapshots_ == 0 || position % block_size_ != block_size_ - 1) return -1;
  const int32_t b = tables_[static_cast<size_t>(seq)][static_cast<size_t>(position / block_size_)];
  Block& blk = blocks_[static_cast<size_t>(b)];
  if (blk.snapshot < 0) {
    if (free_snapshots_.empty()) {
      for (int32_t idle : lru_) {
        if (blocks_[static_cast<size_t>(idle)].snapshot >= 0) {
          DropSnapshot(idle);
          break;
        }
      }
    }
    if (free_snapshots_.empty()) return -1;
    blk.snapshot = free_snapshots_.back();
    free_snapshots_.pop_back();
  }
  blk.snapshot_valid = false;  // until the row has written it (NoteWritten)
  return blk.snapshot;
}

int32_t KvCache::SnapshotBefore(int32_t seq, int64_t position) const {
  if (position <= 0 || position % block_size_ != 0) return -1;
  const std::vector<int32_t>& t = tables_[static_cast<size_t>(seq)];
  const auto i = static_cast<size_t>(position / block_size_ - 1);
  if (i >= t.size() || t[i] == kReleased) return -1;
  const Block& blk = blocks_[static_cast<size_t>(t[i])];
  return blk.snapshot_valid ? blk.snapshot : -1;
}

void KvCache::MaybeRegister(int32_t b) {
  Block& blk = blocks_[static_cast<size_t>(b)];
  const uint64_t full = block_size_ == 64 ? ~uint64_t{0} : (uint64_t{1} << block_size_) - 1;
  if (blk.registered || blk.written != full || blk.provisional != 0) return;
  if (blk.parent >= 0) {
    // Reachable only through a registered parent whose content is the one this block followed.
    const Block& parent = blocks_[static_cast<size_t>(blk.parent)];
    if (!parent.registered || parent.gen != blk.parent_gen) return;
  }
  const Key key{blk.parent, blk.parent_gen, blk.not_fixed == 0, HashTokens(block_tokens(b))};
  if (!registry_.try_emplace(key, b).second) return;  // the same content is cached already
  blk.key = key;
  blk.registered = true;
}

bool KvCache::Reserve(int32_t seq, int64_t n) {
  std::vector<int32_t>& t = tables_[static_cast<size_t>(seq)];
  const int64_t need = BlocksFor(n) - static_cast<int64_t>(t.size());
  if (need <= 0) return true;
  if (need > free_blocks()) return false;
  for (int64_t i = 0; i < need; ++i) {
    const int32_t b = TakeBlock();
    if (!t.empty()) {
      Block& blk = blocks_[static_cast<size_t>(b)];
      blk.parent = t.back();
      blk.parent_gen = blocks_[static_cast<size_t>(t.back())].gen;
    }
    t.push_back(b);
  }
  return true;
}

void KvCache::Truncate(int32_t seq, int64_t n) {
  std::vector<int32_t>& t = tables_[static_cast<size_t>(seq)];
  const auto keep = static_cast<size_t>(BlocksFor(n));
  while (t.size() > keep) {
    if (t.back() != kReleased) Release(t.back());
    t.pop_back();
  }
  int64_t& released = released_[static_cast<size_t>(seq)];
  released = std::min(released, static_cast<int64_t>(t.size()));
  // Positions past n in the last block kept no longer hold K/V. (Never a shared block: only
  // full blocks without provisional rows are shared, and nothing truncates into those.)
  if (keep > 0 && n % block_size_ != 0 && t.back() != kReleased) {
    Block& blk = blocks_[static_cast<size_t>(t.back())];
    const uint64_t kept = (uint64_t{1} << (n % block_size_)) - 1;
    if ((blk.written & ~kept) != 0) {
      DropSnapshot(t.back());  // its last position is no longer written
      blk.written &= kept;
      blk.not_fixed &= kept;
      blk.provisional &= kept;
      Changed(t.back());
    }
  }
}

int64_t KvCache::ReleaseBefore(int32_t seq, int64_t position) {
  std::vector<int32_t>& t = tables_[static_cast<size_t>(seq)];
  int64_t& released = released_[static_cast<size_t>(seq)];
  // The last block stays: the next block reserved follows it in the prefix cache's chain.
  const int64_t until = std::min(position / block_size_, static_cast<int64_t>(t.size()) - 1);
  const int64_t before = released;
  for (; released < until; ++released) {
    Release(t[static_cast<size_t>(released)]);
    t[static_cast<size_t>(released)] = kReleased;
  }
  // The first block kept now follows one this sequence can no longer rewrite, whose content
  // may change once another sequence takes it: its rows were computed against the content it
  // followed when they were written (NoteWritten), never against what the block holds later.
  if (released > before) blocks_[static_cast<size_t>(t[static_cast<size_t>(released)])].parent_frozen = true;
  window_releases_ += released - before;
  return released - before;
}

int64_t KvCache::reserved_positions(int32_t seq) const {
  return static_cast<int64_t>(tables_[static_cast<size_t>(seq)].size()) * block_size_;
}

void KvCache::NoteWritten(int32_t seq, int64_t position, int32_t token, bool fixed, bool provisional, bool snapshot) {
  if (!prefix_caching_) return;
  const int32_t b = tables_[static_cast<size_t>(seq)][static_cast<size_t>(position / block_size_)];
  Block& blk = blocks_[static_cast<size_t>(b)];
  const int64_t i = position % block_size_;
  if (i == block_size_ - 1 && n_snapshots_ > 0) {
    if (snapshot && blk.snapshot >= 0) {
      blk.snapshot_valid = true;
    } else {
      DropSnapshot(b);  // the state after the row went elsewhere (a candidate's) or nowhere
    }
  }
  const uint64_t bit = uint64_t{1} << i;
  int32_t& slot = tokens_[static_cast<size_t>(b) * block_size_ + static_cast<size_t>(i)];
  const bool same = (blk.written & bit) != 0 && slot == token && ((blk.not_fixed & bit) == 0) == fixed &&
                    ((blk.provisional & bit) != 0) == provisional;
  if (same) return;  // a rewrite of the same row under the same schedule: the same bits
  if (blk.written & bit) Changed(b);
  // The row was computed against what the block before holds now. (When that block's content
  // changes — a verify pass rewriting candidates — every later row of the sequence is rewritten
  // in the same pass or truncated, so a full block never mixes rows of both.)
  if (blk.parent >= 0 && !blk.parent_frozen) blk.parent_gen = blocks_[static_cast<size_t>(blk.parent)].gen;
  slot = token;
  blk.written |= bit;
  blk.not_fixed = fixed ? blk.not_fixed & ~bit : blk.not_fixed | bit;
  blk.provisional = provisional ? blk.provisional | bit : blk.provisional & ~bit;
  MaybeRegister(b);
}

int64_t KvCache::MapCachedPrefix(int32_t seq, std::span<const int32_t> tokens, int64_t max_positions,
                                 bool fixed_only) {
  std::vector<int32_t>& t = tables_[static_cast<size_t>(seq)];
  if (!prefix_caching_ || !t.empty()) return 0;
  const int64_t limit = std::min<int64_t>(max_positions, static_cast<int64_t>(tokens.size()));
  int32_t parent = -1;
  uint32_t parent_gen = 0;
  int64_t n = 0;
  for (; n + block_size_ <= limit; n += block_size_) {
    const int32_t* want = tokens.data() + n;
    const uint64_t hash = HashTokens(want);
    int32_t found = -1;
    for (bool fixed : {true, false}) {
      if (!fixed && fixed_only) break;
      auto it = registry_.find(Key{parent, parent_gen, fixed, hash});
      if (it != registry_.end() && std::equal(want, want + block_size_, block_tokens(it->second))) {
        found = it->second;
        break;
      }
    }
    if (found < 0) break;
    Block& blk = blocks_[static_cast<size_t>(found)];
    if (blk.refs++ == 0) lru_.erase(blk.lru);
    t.push_back(found);
    parent = found;
    parent_gen = blk.gen;
  }
  if (n_snapshots_ > 0) {  // continued only from a block whose state after it was kept
    while (!t.empty() && !blocks_[static_cast<size_t>(t.back())].snapshot_valid) {
      Release(t.back());
      t.pop_back();
      n -= block_size_;
    }
  }
  return n;
}

}  // namespace llm42
