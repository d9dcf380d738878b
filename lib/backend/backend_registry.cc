#include "lib/backend/backend_registry.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "lib/backend/backend_plugin.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/util/logging.h"
#include "lib/util/platform.h"
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

// The backends a build may load as a plug-in beside libllm42 (backend_plugin.h) where it does not
// compile them in.
constexpr std::string_view kPluginBackends[] = {"cuda"};

// CUDA as a plug-in, where it is not compiled in.
absl::StatusOr<const BackendEntry*> CudaPlugin() {
  constexpr std::string_view kName = kPluginBackends[0];
  const std::filesystem::path path = FindBackendPlugin(std::string(kName));
  absl::StatusOr<const BackendEntry*> e = LoadBackendPlugin(path);
  if (e.ok() && std::string_view((*e)->name) != kName) {
    return UnsupportedError(platform::PathUtf8(path), " holds backend '", (*e)->name, "', not '", std::string(kName),
                            "'");
  }
  return e;
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

std::vector<std::string_view> KnownBackendNames() {
  std::vector<std::string_view> names = {"auto"};
  for (const BackendEntry& e : RegisteredBackends()) names.emplace_back(e.name);
  for (std::string_view plugin : kPluginBackends) {
    if (std::find(names.begin(), names.end(), plugin) == names.end()) names.push_back(plugin);
  }
  return names;
}

bool IsKnownBackendName(std::string_view name) {
  const std::vector<std::string_view> names = KnownBackendNames();
  return std::find(names.begin(), names.end(), name) != names.end();
}

absl::StatusOr<const BackendEntry*> ResolveBackend(std::string_view name) {
  const bool cuda_built_in = RegisteredBackends().front().name == std::string_view("cuda");
  if (name == "auto") {
    if (!cuda_built_in) {
      absl::StatusOr<const BackendEntry*> cuda = CudaPlugin();
      absl::Status usable = cuda.ok() ? (*cuda)->usable() : cuda.status();
      if (usable.ok()) return *cuda;
      Log(LogLevel::kInfo, "backend cuda skipped: ", usable.message());
    }
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
    absl::StatusOr<const BackendEntry*> cuda = CudaPlugin();
    if (!cuda.ok()) {
      return UnsupportedError("backend 'cuda' is not built into this llm42, and its plug-in is not usable: ",
                              cuda.status().message());
    }
    if (absl::Status usable = (*cuda)->usable(); !usable.ok()) return usable;
    return *cuda;
  }
  return InvalidArgument("unknown backend '", std::string(name), "' (auto, cpu, cuda)");
}

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(std::string_view name,
                                                       const BackendOptions& options) {
  LLM42_ASSIGN_OR_RETURN(const BackendEntry* entry, ResolveBackend(name));
  return entry->create(options);
}

}  // namespace llm42
