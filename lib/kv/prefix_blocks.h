#ifndef LLM42_KV_PREFIX_BLOCKS_H_
#define LLM42_KV_PREFIX_BLOCKS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/kv/kv_cache.h"

namespace llm42 {

// A token prefix's full blocks as a KvCache's prefix cache holds them, copied out of the cache
// and back in: what a saved conversation carries (lib/engine/saved_conversation.h). The K/V
// bytes are the storage's (the backend's layout, block_bytes a block), reached through the
// functions the caller passes, so the cache's bookkeeping and the device memory stay apart.
struct PrefixBlocks {
  std::vector<uint8_t> fixed;  // per block: every position was computed under fixed
  std::vector<uint8_t> kv;     // fixed.size() blocks of block_bytes
};

using ReadKvBlockFn = std::function<absl::Status(int32_t block, std::span<uint8_t> out)>;
using WriteKvBlockFn = std::function<absl::Status(int32_t block, std::span<const uint8_t> in)>;
// A recurrent-state snapshot by its KvCache snapshot id (a model with recurrent layers).
using SnapshotFn = std::function<absl::Status(int32_t snapshot)>;

// The cached full blocks that match a prefix of `tokens` (the longest chain, under either
// schedule; where the cache keeps snapshots, up to the last block with one, whose snapshot
// `read_snapshot` is given), held while they are read and released after. The first error of
// `read` (or `read_snapshot`) is returned.
absl::StatusOr<PrefixBlocks> CopyCachedPrefixOut(KvCache& cache, std::span<const int32_t> tokens, size_t block_bytes,
                                                 const ReadKvBlockFn& read, const SnapshotFn& read_snapshot = nullptr);

// Puts blocks copied out before (of `tokens`' first blocks.fixed.size() blocks; `tokens` holds at
// least that many) into fresh blocks, registered in the prefix cache as the rows that computed
// them would have been, then released: they stay cached until a sequence maps them or the pool
// evicts them. ResourceExhausted when the pool cannot hold them; InvalidArgument when the sizes
// disagree; the first error of `write`.
// `write_snapshot` (where set, and the cache keeps snapshots) fills the last block's snapshot.
absl::Status CopyPrefixIn(KvCache& cache, std::span<const int32_t> tokens, size_t block_bytes,
                          const PrefixBlocks& blocks, const WriteKvBlockFn& write,
                          const SnapshotFn& write_snapshot = nullptr);

}  // namespace llm42

#endif  // LLM42_KV_PREFIX_BLOCKS_H_
