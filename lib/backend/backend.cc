#include "lib/backend/backend.h"

#include <vector>

#include "absl/strings/str_cat.h"

namespace llm42 {

absl::StatusOr<size_t> KvBlockOffset(const KvShape& shape, size_t element_bytes, int32_t block, size_t bytes) {
  const auto block_bytes = static_cast<size_t>(shape.block_elements()) * element_bytes;
  if (block < 0 || block >= shape.n_blocks || bytes != block_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("KV block ", block, " of ", shape.n_blocks, ": ", bytes,
                                                   " bytes where a block has ", block_bytes));
  }
  return static_cast<size_t>(block) * block_bytes;
}

absl::Status Backend::ArgmaxRows(const float* x, int64_t n_cols, std::span<const int32_t> rows,
                                 ArgmaxSummary* host_out) {
  std::vector<float> row(static_cast<size_t>(n_cols));
  for (size_t r = 0; r < rows.size(); ++r) {
    if (absl::Status s = CopyToHost(row.data(), x + static_cast<int64_t>(rows[r]) * n_cols, row.size()); !s.ok()) {
      return s;
    }
    host_out[r] = SummarizeArgmax(row);
  }
  return absl::OkStatus();
}

}  // namespace llm42
