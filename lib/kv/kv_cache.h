#ifndef LLM42_KV_KV_CACHE_H_
#define LLM42_KV_KV_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace llm42 {

// The bookkeeping of paged keys and values: a pool of fixed-size blocks, each holding
// block_size positions of every layer, and a block table per sequence. The storage itself is
// the backend's (Backend::AllocateKv, of the same number of blocks). Truncating a sequence
// returns its tail blocks to the pool, so a rollback costs O(blocks freed). Not thread-safe
// (the engine thread owns it).
//
// Prefix caching (on unless disabled): the engine reports every K/V row it writes (NoteWritten:
// the token and whether the row ran under `fixed`). A block whose positions are all written, none
// of them provisional (an unverified candidate of a deterministic request, which a rollback may
// rewrite), is registered under its content: the block before it in the sequence (with that
// block's generation, bumped whenever its content changes, so a key never outlives what it
// names), its tokens, and whether every row was computed under `fixed`. Blocks are
// reference-counted; one that no sequence holds stays cached, evictable least recently used
// when the pool needs room, never while held. MapCachedPrefix gives a new sequence the longest
// registered chain of full blocks matching its tokens; `fixed_only` follows only `fixed`
// blocks, whose K/V are those a cold `fixed` prefill computes, bit for bit (the schedule is
// row-invariant), which is what lets deterministic requests hit the cache.
//
// Sliding windows: when every layer of the model reads only a window of recent positions, the
// blocks a sequence will never read again are released while it runs (ReleaseBefore): its table
// keeps their places, marked kReleased, so positions keep their blocks' numbering; a released
// block that is registered stays cached like any block no sequence holds.
class KvCache {
 public:
  static constexpr int32_t kDefaultBlockSize = 16;
  // A block-table entry whose block the sequence released (ReleaseBefore); never read.
  static constexpr int32_t kReleased = -1;

  explicit KvCache(int64_t n_blocks, int32_t block_size = kDefaultBlockSize, bool prefix_caching = true);

  int32_t block_size() const { return block_size_; }
  int64_t n_blocks() const { return n_blocks_; }
  // Blocks a Reserve can take: never used, or cached and held by no sequence (evicted on use).
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size() + lru_.size()); }
  int64_t capacity_tokens() const { return n_blocks_ * block_size_; }
  int64_t BlocksFor(int64_t positions) const { return (positions + block_size_ - 1) / block_size_; }
  bool prefix_caching() const { return prefix_caching_; }
  // Cached blocks held by no sequence, and blocks evicted so far.
  int64_t cached_idle_blocks() const { return static_cast<int64_t>(lru_.size()); }
  int64_t evictions() const { return evictions_; }
  // Blocks released behind sliding windows so far (ReleaseBefore).
  int64_t window_releases() const { return window_releases_; }

  // Sequences are small integer ids, reused after Free.
  int32_t Create();
  void Free(int32_t seq);
  // Makes room for positions [0, n); false (and no change) when the pool lacks blocks.
  bool Reserve(int32_t seq, int64_t n);
  // Keeps positions [0, n), returning the blocks past them to the pool.
  void Truncate(int32_t seq, int64_t n);
  // Releases the blocks of `seq` whose positions all lie before `position` (the sequence will
  // never read them again), all but its last block, leaving kReleased in their table entries;
  // returns how many.
  int64_t ReleaseBefore(int32_t seq, int64_t position);
  // Leading table entries of `seq` that ReleaseBefore released.
  int64_t released_blocks(int32_t seq) const { return released_[static_cast<size_t>(seq)]; }
  int64_t reserved_positions(int32_t seq) const;
  const int32_t* block_table(int32_t seq) const { return tables_[static_cast<size_t>(seq)].data(); }

  // Position `position` of `seq` (reserved) now holds the K/V of `token`, computed under `fixed`
  // or not; `provisional` when a rollback may still rewrite it.
  // `snapshot`: the row also wrote the state after it into the snapshot SnapshotAt gave it.
  void NoteWritten(int32_t seq, int64_t position, int32_t token, bool fixed, bool provisional, bool snapshot = false);
  // Maps into `seq` (which holds no blocks) the longest cached chain of full blocks whose tokens
  // are a prefix of `tokens`, at most max_positions positions; returns the positions mapped.
  int64_t MapCachedPrefix(int32_t seq, std::span<const int32_t> tokens, int64_t max_positions, bool fixed_only);
  // Whether every position of `block` was computed under fixed.
  bool block_fixed(int32_t block) const { return blocks_[static_cast<size_t>(block)].not_fixed == 0; }

  // Recurrent-state snapshots (a model with recurrent layers: lib/engine/recurrent_slots.h). A
  // cached block's K/V are not all a sequence leaves behind at its end: a recurrent layer's state
  // after the block's last position is too, and a prefix can be continued only from a block whose
  // state was kept. EnableSnapshots(n) gives the cache n snapshot ids; a block owns at most one,
  // valid while it holds the state its last position's row wrote (NoteWritten's `snapshot`), which
  // goes when that row is rewritten without one or truncated, and with the block when it is taken
  // anew. MapCachedPrefix then maps a chain only up to its last block with a valid snapshot.
  void EnableSnapshots(int64_t n);
  int64_t n_snapshots() const { return n_snapshots_; }
  // The snapshot id the row writing `position` of `seq` (its block's last position) stores the
  // state in: the block's own, else a free one, else one taken from the least recently used
  // idle block holding one; -1 when there is none to take, or snapshots are off.
  int32_t SnapshotAt(int32_t seq, int64_t position);
  // The valid snapshot of the block of `seq` that ends just before `position` (a block boundary
  // past 0), else -1.
  int32_t SnapshotBefore(int32_t seq, int64_t position) const;

 private:
  struct Key {
    int32_t parent;
    uint32_t parent_gen;
    bool fixed;
    uint64_t tokens_hash;
    bool operator==(const Key&) const = default;
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.parent, k.parent_gen, k.fixed, k.tokens_hash);
    }
  };
  struct Block {
    int32_t refs = 0;
    uint32_t gen = 0;
    int32_t parent = -1;  // the block before it in the sequence that wrote it
    uint32_t parent_gen = 0;
    bool parent_frozen = false;  // the parent was released behind a window (ReleaseBefore)
    uint64_t written = 0;      // bit i: position i holds K/V
    uint64_t not_fixed = 0;    // bit i: position i was computed under fast
    uint64_t provisional = 0;  // bit i: a rollback may rewrite position i
    bool registered = false;
    int32_t snapshot = -1;        // its snapshot id (EnableSnapshots), or none
    bool snapshot_valid = false;  // which holds the state after its last position's row
    Key key{};
    std::list<int32_t>::iterator lru;  // valid while registered with refs == 0
  };

  const int32_t* block_tokens(int32_t b) const { return tokens_.data() + static_cast<size_t>(b) * block_size_; }
  uint64_t HashTokens(const int32_t* tokens) const;
  int32_t TakeBlock();
  void Release(int32_t b);
  void Unregister(int32_t b);
  void MaybeRegister(int32_t b);
  void Changed(int32_t b);
  void DropSnapshot(int32_t b);

  int64_t n_blocks_;
  int32_t block_size_;
  bool prefix_caching_;
  std::vector<int32_t> free_;
  std::vector<std::vector<int32_t>> tables_;
  std::vector<int64_t> released_;  // per sequence: its leading kReleased entries
  std::vector<int32_t> free_seqs_;
  std::vector<Block> blocks_;
  std::vector<int32_t> tokens_;  // block_size per block
  std::list<int32_t> lru_;       // registered blocks held by no sequence, least recent first
  absl::flat_hash_map<Key, int32_t> registry_;
  int64_t n_snapshots_ = 0;
  std::vector<int32_t> free_snapshots_;
  int64_t evictions_ = 0;
  int64_t window_releases_ = 0;
};

}  // namespace llm42

#endif  // LLM42_KV_KV_CACHE_H_
