#ifndef LLM42_KV_KV_CACHE_H_
#define LLM42_KV_KV_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace llm42 {

// The bookkeeping of paged keys and values: a pool of fixed-size blocks, each holding
// block_size positions of every layer, and a block table per sequence. The storage itself is
// the backend's (Backend::AllocateKv, of the same number of blocks). Truncating a sequence
// returns its tail blocks to the pool, so a rollback costs O(blocks freed). Not thread-safe
// (the engine thread owns it).
class KvCache {
 public:
  static constexpr int32_t kDefaultBlockSize = 16;

  explicit KvCache(int64_t n_blocks, int32_t block_size = kDefaultBlockSize);

  int32_t block_size() const { return block_size_; }
  int64_t n_blocks() const { return n_blocks_; }
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }
  int64_t capacity_tokens() const { return n_blocks_ * block_size_; }
  int64_t BlocksFor(int64_t positions) const { return (positions + block_size_ - 1) / block_size_; }

  // Sequences are small integer ids, reused after Free.
  int32_t Create();
  void Free(int32_t seq);
  // Makes room for positions [0, n); false (and no change) when the pool lacks blocks.
  bool Reserve(int32_t seq, int64_t n);
  // Keeps positions [0, n), returning the blocks past them to the pool.
  void Truncate(int32_t seq, int64_t n);
  int64_t reserved_positions(int32_t seq) const;
  const int32_t* block_table(int32_t seq) const { return tables_[static_cast<size_t>(seq)].data(); }

 private:
  int64_t n_blocks_;
  int32_t block_size_;
  std::vector<int32_t> free_;
  std::vector<std::vector<int32_t>> tables_;
  std::vector<int32_t> free_seqs_;
};

}  // namespace llm42

#endif  // LLM42_KV_KV_CACHE_H_
