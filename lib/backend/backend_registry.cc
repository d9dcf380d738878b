#include "lib/backend/backend_registry.h"

#include "absl/strings/str_cat.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/util/logging.h"
#if LLM42_HAVE_CUDA
#include "lib/backend/cuda/cuda_factory.h"
#endif

namespace llm42 {
namespace {

absl::Status CpuUsable() { return absl::OkStatus(); }

absl::StatusOr<std::unique_ptr<Backend>> CreateCpu(const BackendOptions& options) {
  return std::make_unique<CpuBackend>(options.threads, /*allow_simd=*/true,
                                      options.kv_dtype == KvDtype::kAuto ? KvDtype::kF32 : options.kv_dtype);
}

}  // namespace

const std::vector<BackendEntry>& RegisteredBackends() {
  static const std::vector<BackendEntry> entries = {
#if LLM42_HAVE_CUDA
      {"cuda", CudaUsable, CreateCudaBackend},
#endif
      {"cpu", CpuUsable, CreateCpu},
  };
  return entries;
}

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(std::string_view name,
                                                       const BackendOptions& options) {
  if (name == "auto") {
    for (const BackendEntry& e : RegisteredBackends()) {
      const absl::Status usable = e.usable();
      if (usable.ok()) return e.create(options);
      Log(LogLevel::kInfo, "backend ", e.name, " skipped: ", usable.message());
    }
    return absl::InternalError("no usable backend");  // the CPU always is
  }
  for (const BackendEntry& e : RegisteredBackends()) {
    if (name != e.name) continue;
    if (absl::Status usable = e.usable(); !usable.ok()) return usable;
    return e.create(options);
  }
  if (name == "cuda") {
    return absl::UnimplementedError(
        "backend 'cuda' is not built into this llm42 (configure with the CUDA toolkit present)");
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown backend '", std::string(name), "' (auto, cpu, cuda)"));
}

}  // namespace llm42
