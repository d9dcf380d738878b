#ifndef LLM42_BACKEND_BACKEND_PLUGIN_H_
#define LLM42_BACKEND_BACKEND_PLUGIN_H_

// A backend shipped as a shared library of its own, loaded at run time: the CUDA backend as
// libllm42-cuda.so (llm42-cuda.dll on Windows), so that libllm42 itself never needs the CUDA
// libraries and a package can ship the plug-in separately (as llama.cpp's dynamically loaded
// backends and ONNX Runtime's execution-provider libraries are).
//
// The plug-in exports one C function, kBackendPluginEntry, returning a BackendPlugin. The
// plug-in and libllm42 exchange C++ objects (Backend, absl::Status), so they must come from the
// same llm42 build: the loader refuses a plug-in of another llm42 version or plug-in ABI, naming
// both. The plug-in carries its own copy of the engine parts it uses (linked statically, hidden);
// the host passes its logger, so the plug-in's messages reach the application's log callback.
#include <cstdint>
#include <filesystem>
#include <string_view>

#include "absl/status/statusor.h"
#include "lib/backend/backend_registry.h"

namespace llm42 {

// Bumped whenever Backend, BackendOptions or these structs change shape. 2: Backend's DrawRows,
// ControlRows and UploadWeights (the plug-in and libllm42 of one version could otherwise differ
// in them between development builds).
inline constexpr uint32_t kBackendPluginAbi = 2;
inline constexpr char kBackendPluginEntry[] = "llm42_backend_plugin";

extern "C" {

// What libllm42 lends a plug-in.
struct BackendPluginHost {
  // Logs through libllm42's sink (llm42_set_log_callback) at LogLevel `level`.
  void (*log)(int32_t level, const char* message);
};

struct BackendPlugin {
  uint32_t abi;                // kBackendPluginAbi of the plug-in's build
  const char* llm42_version;   // kLibraryVersion of the plug-in's build
  BackendEntry entry;          // its name, usable and create
};

using BackendPluginEntryFn = const BackendPlugin* (*)(const BackendPluginHost* host);

}  // extern "C"

// The plug-in file of backend `name` for this platform: "libllm42-cuda.so", "llm42-cuda.dll".
std::filesystem::path BackendPluginFileName(std::string_view name);

// Loads the plug-in at `path` (once per path; it stays loaded) and returns its backend.
// UNSUPPORTED when the file is missing or cannot be loaded (the loader's reason: a CUDA library
// it needs is absent, say), or naming both versions when it is another llm42's.
absl::StatusOr<const BackendEntry*> LoadBackendPlugin(const std::filesystem::path& path);

// Where backend `name`'s plug-in is looked for: $LLM42_PLUGIN_DIR where set, else the folder of
// the library (or program) this code is linked into, then its ../lib (a program in an SDK's bin/
// beside the plug-in in lib/). The first that holds the file, else the first.
std::filesystem::path FindBackendPlugin(std::string_view name);

}  // namespace llm42

#endif  // LLM42_BACKEND_BACKEND_PLUGIN_H_
