#include "lib/kv/kv_cache.h"

#include <cstddef>

namespace llm42 {

KvCache::KvCache(int64_t n_blocks, int32_t block_size) : n_blocks_(n_blocks), block_size_(block_size) {
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
  return static_cast<int32_t>(tables_.size() - 1);
}

void KvCache::Free(int32_t seq) {
  Truncate(seq, 0);
  free_seqs_.push_back(seq);
}

bool KvCache::Reserve(int32_t seq, int64_t n) {
  std::vector<int32_t>& t = tables_[static_cast<size_t>(seq)];
  const int64_t need = BlocksFor(n) - static_cast<int64_t>(t.size());
  if (need <= 0) return true;
  if (need > free_blocks()) return false;
  for (int64_t i = 0; i < need; ++i) {
    t.push_back(free_.back());
    free_.pop_back();
  }
  return true;
}

void KvCache::Truncate(int32_t seq, int64_t n) {
  std::vector<int32_t>& t = tables_[static_cast<size_t>(seq)];
  const auto keep = static_cast<size_t>(BlocksFor(n));
  while (t.size() > keep) {
    free_.push_back(t.back());
    t.pop_back();
  }
}

int64_t KvCache::reserved_positions(int32_t seq) const {
  return static_cast<int64_t>(tables_[static_cast<size_t>(seq)].size()) * block_size_;
}

}  // namespace llm42
