#include "lib/backend/backend_registry.h"

#include "absl/strings/str_cat.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/util/logging.h"
#include "lib/util/status.h"
#if LLM42_HAVE_CUDA
#include "lib/backend/cuda/cuda_factory.h"
#endif

namespace llm42 {
namespace {

absl::Status CpuUsable() { return absl::OkStatus(); }

absl::StatusOr<std::unique_ptr<Backend>> CreateCpu(const BackendOptions& options) {
  return std::make_unique<CpuBackend>(options.threads, /*allow_simd=*/true, options.kv_dtype);
}

}  // namespace

absl::StatusOr<size_t> KvBlockOffset(const KvShape& shape, size_t element_bytes, int32_t block, size_t bytes) {
  const auto block_bytes = static_cast<size_t>(shape.block_elements()) * element_bytes;
  if (block < 0 || block >= shape.n_blocks || bytes != block_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("KV block ", block, " of ", shape.n_blocks, ": ", bytes,
                                                   " bytes where a block has ", block_bytes));
  }
  return static_cast<size_t>(block) * block_bytes;
}

const std::vector<BackendEntry>& RegisteredBackends() {
  static const std::vector<BackendEntry> entries = {
#if LLM42_HAVE_CUDA
      {"cuda", CudaUsable, CreateCudaBackend},
#endif
      {"cpu", CpuUsable, CreateCpu},
  };
  return entries;
}

bool IsKnownBackendName(std::string_view name) { return name == "auto" || name == "cpu" || name == "cuda"; }

absl::StatusOr<const BackendEntry*> ResolveBackend(std::string_view name) {
  if (name == "auto") {
    for (const BackendEntry& e : RegisteredBackends()) {
      const absl::Status usable = e.usable();
      if (usable.ok()) return &e;
      Log(LogLevel::kInfo, "backend ", e.name, " skipped: ", usable.message());
    }
    return absl::InternalError("no usable backend");  // the CPU always is
  }
  for (const BackendEntry& e : RegisteredBackends()) {
    if (name != e.name) continue;
    if (absl::Status usable = e.usable(); !usable.ok()) return usable;
    return &e;
  }
  if (name == "cuda") {
    return absl::UnimplementedError(
        "backend 'cuda' is not built into this llm42 (configure with the CUDA toolkit present)");
  }
  return InvalidArgument("unknown backend '", std::string(name), "' (auto, cpu, cuda)");
}

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(std::string_view name,
                                                       const BackendOptions& options) {
  LLM42_ASSIGN_OR_RETURN(const BackendEntry* entry, ResolveBackend(name));
  return entry->create(options);
}

}  // namespace llm42
