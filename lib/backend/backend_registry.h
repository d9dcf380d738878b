#ifndef LLM42_BACKEND_BACKEND_REGISTRY_H_
#define LLM42_BACKEND_BACKEND_REGISTRY_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/backend/backend.h"

namespace llm42 {

struct BackendOptions {
  int threads = 0;  // CPU worker threads (0 = all cores); the host threads of other backends
  KvDtype kv_dtype = KvDtype::kAuto;  // UNSUPPORTED where the backend cannot store it
};

// A backend this build of llm42 can create.
struct BackendEntry {
  const char* name;
  // OK when the backend can run here; else UNSUPPORTED saying why (no driver, no device,
  // compute capability too old).
  absl::Status (*usable)();
  absl::StatusOr<std::unique_ptr<Backend>> (*create)(const BackendOptions& options);
};

// The backends compiled in, most preferred first ("cuda" when built with it, then "cpu").
const std::vector<BackendEntry>& RegisteredBackends();

// The names a session's backend option takes: "auto", the backends compiled in, then those a
// build may load as a plug-in (cuda, where it is not compiled in).
std::vector<std::string_view> KnownBackendNames();
// Whether `name` is one of KnownBackendNames(), built in or not.
bool IsKnownBackendName(std::string_view name);

// The backend `name` stands for: "auto" is the first usable backend (CUDA where a usable device
// exists, else the CPU); else a registered name. INVALID_ARGUMENT for an unknown name;
// UNSUPPORTED, with the reason, for a known backend that is not built in or cannot run here.
absl::StatusOr<const BackendEntry*> ResolveBackend(std::string_view name);

// `name` is "auto" (the first usable backend: CUDA where a usable device exists, else the
// CPU), or a registered name. INVALID_ARGUMENT for an unknown name; UNSUPPORTED, with the
// reason, for a known backend that is not built in or cannot run here.
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(std::string_view name,
                                                       const BackendOptions& options);

}  // namespace llm42

#endif  // LLM42_BACKEND_BACKEND_REGISTRY_H_
