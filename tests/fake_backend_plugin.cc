// A backend plug-in for backend_plugin_test: "cuda" by name, the CPU backend inside, and a log
// line when created. Built twice: as this llm42's, and (FAKE_PLUGIN_VERSION) as another
// version's, which the loader must refuse.
#include <memory>

#include "lib/backend/backend_plugin_export.h"
#include "lib/backend/cpu/cpu_backend.h"

namespace {

absl::Status Usable() { return absl::OkStatus(); }

absl::StatusOr<std::unique_ptr<llm42::Backend>> Create(const llm42::BackendOptions& options) {
  llm42::Log(llm42::LogLevel::kInfo, "fake plug-in: a CPU backend of ", options.threads, " threads");
  return std::make_unique<llm42::CpuBackend>(options.threads, /*allow_simd=*/true, llm42::KvDtype::kF32);
}

}  // namespace

#ifdef FAKE_PLUGIN_VERSION
#undef LLM42_LIBRARY_VERSION
#define LLM42_LIBRARY_VERSION FAKE_PLUGIN_VERSION
#endif
LLM42_DEFINE_BACKEND_PLUGIN((llm42::BackendEntry{"cuda", Usable, Create}))
