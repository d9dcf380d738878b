#ifndef LLM42_KV_KV_CACHE_H_
#define LLM42_KV_KV_CACHE_H_

#include <cstdint>
#include <vector>

namespace llm42 {

// Keys and values of every layer for a fixed number of sequence slots, each holding up to
// `capacity` positions. A slot's layout per layer is [position][kv_dim], so attention reads a
// sequence's prefix contiguously.
class KvCache {
 public:
  KvCache(int64_t n_layers, int64_t kv_dim, int32_t n_slots, int32_t capacity);

  int32_t capacity() const { return capacity_; }
  int32_t free_slots() const { return static_cast<int32_t>(free_.size()); }

  // A free slot, or -1 when all are taken.
  int32_t Allocate();
  void Release(int32_t slot);

  float* keys(int32_t slot, int64_t layer) { return Base(slot, layer, 0); }
  float* values(int32_t slot, int64_t layer) { return Base(slot, layer, 1); }

 private:
  float* Base(int32_t slot, int64_t layer, int kind);

  int64_t n_layers_, kv_dim_;
  int32_t capacity_;
  std::vector<float> data_;
  std::vector<int32_t> free_;
};

}  // namespace llm42

#endif  // LLM42_KV_KV_CACHE_H_
