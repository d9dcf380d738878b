#include "lib/kv/prefix_blocks.h"

#include "absl/strings/str_cat.h"

namespace llm42 {

absl::StatusOr<PrefixBlocks> CopyCachedPrefixOut(KvCache& cache, std::span<const int32_t> tokens, size_t block_bytes,
                                                 const ReadKvBlockFn& read, const SnapshotFn& read_snapshot) {
  const int32_t seq = cache.Create();
  const int64_t blocks =
      cache.MapCachedPrefix(seq, tokens, static_cast<int64_t>(tokens.size()), false) / cache.block_size();
  PrefixBlocks out;
  out.kv.resize(static_cast<size_t>(blocks) * block_bytes);
  absl::Status st;
  for (int64_t b = 0; b < blocks && st.ok(); ++b) {
    const int32_t id = cache.block_table(seq)[b];
    out.fixed.push_back(cache.block_fixed(id) ? 1 : 0);
    st = read(id, std::span(out.kv).subspan(static_cast<size_t>(b) * block_bytes, block_bytes));
  }
  if (st.ok() && blocks > 0 && read_snapshot && cache.n_snapshots() > 0) {
    st = read_snapshot(cache.SnapshotBefore(seq, blocks * cache.block_size()));
  }
  cache.Free(seq);
  if (!st.ok()) return st;
  return out;
}

absl::Status CopyPrefixIn(KvCache& cache, std::span<const int32_t> tokens, size_t block_bytes,
                          const PrefixBlocks& blocks, const WriteKvBlockFn& write, const SnapshotFn& write_snapshot) {
  const auto n = static_cast<int64_t>(blocks.fixed.size());
  const int64_t positions = n * cache.block_size();
  if (blocks.kv.size() != static_cast<size_t>(n) * block_bytes || static_cast<int64_t>(tokens.size()) < positions) {
    return absl::InvalidArgumentError(absl::StrCat(n, " blocks of ", block_bytes, " bytes need ", positions,
                                                   " tokens and ", n * static_cast<int64_t>(block_bytes),
                                                   " bytes; given ", tokens.size(), " and ", blocks.kv.size()));
  }
  const int32_t seq = cache.Create();
  if (!cache.Reserve(seq, positions)) {
    cache.Free(seq);
    return absl::ResourceExhaustedError(
        absl::StrCat("the KV cache cannot hold ", positions, " more positions (", cache.free_blocks(), " of ",
                     cache.n_blocks(), " blocks free)"));
  }
  absl::Status st;
  for (int64_t b = 0; b < n && st.ok(); ++b) {
    st = write(cache.block_table(seq)[b], std::span(blocks.kv).subspan(static_cast<size_t>(b) * block_bytes, block_bytes));
    for (int64_t p = b * cache.block_size(); st.ok() && p < (b + 1) * cache.block_size(); ++p) {
      // The last block's last position carries the state after it, where one was saved.
      bool snapshot = false;
      if (p == positions - 1 && write_snapshot) {
        const int32_t id = cache.SnapshotAt(seq, p);
        if (id >= 0) st = write_snapshot(id);
        snapshot = id >= 0 && st.ok();
      }
      if (st.ok()) cache.NoteWritten(seq, p, tokens[static_cast<size_t>(p)], blocks.fixed[static_cast<size_t>(b)] != 0, false, snapshot);
    }
  }
  cache.Free(seq);
  return st;
}

}  // namespace llm42
