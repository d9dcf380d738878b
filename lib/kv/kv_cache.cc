#include "lib/kv/kv_cache.h"

#include <cstddef>

namespace llm42 {

KvCache::KvCache(int64_t n_layers, int64_t kv_dim, int32_t n_slots, int32_t capacity)
    : n_layers_(n_layers), kv_dim_(kv_dim), capacity_(capacity) {
  data_.resize(static_cast<size_t>(n_slots) * static_cast<size_t>(n_layers) * 2 *
               static_cast<size_t>(capacity) * static_cast<size_t>(kv_dim));
  for (int32_t s = n_slots - 1; s >= 0; --s) free_.push_back(s);
}

int32_t KvCache::Allocate() {
  if (free_.empty()) return -1;
  const int32_t s = free_.back();
  free_.pop_back();
  return s;
}

void KvCache::Release(int32_t slot) { free_.push_back(slot); }

float* KvCache::Base(int32_t slot, int64_t layer, int kind) {
  const size_t per_matrix = static_cast<size_t>(capacity_) * static_cast<size_t>(kv_dim_);
  const size_t index = (static_cast<size_t>(slot) * static_cast<size_t>(n_layers_) +
                        static_cast<size_t>(layer)) * 2 + static_cast<size_t>(kind);
  return data_.data() + index * per_matrix;
}

}  // namespace llm42
