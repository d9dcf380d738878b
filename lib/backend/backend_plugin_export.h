#ifndef LLM42_BACKEND_BACKEND_PLUGIN_EXPORT_H_
#define LLM42_BACKEND_BACKEND_PLUGIN_EXPORT_H_

// For a plug-in's own source: defines its exported entry point (backend_plugin.h) returning
// `entry`, and routes the plug-in's log messages to the host's logger.
//
//   LLM42_DEFINE_BACKEND_PLUGIN((llm42::BackendEntry{"cuda", llm42::CudaUsable, llm42::CreateCudaBackend}))
#include "lib/backend/backend_plugin.h"
#include "lib/util/logging.h"
#include "lib/util/version.h"

#if defined(_WIN32)
#define LLM42_PLUGIN_EXPORT __declspec(dllexport)
#else
#define LLM42_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

namespace llm42::internal {

inline const BackendPluginHost*& PluginHost() {
  static const BackendPluginHost* host = nullptr;
  return host;
}

// The plug-in's copy of the logger hands every message to the host, which filters by its level.
inline void AdoptHostLogger(const BackendPluginHost* host) {
  if (host == nullptr || host->log == nullptr) return;
  PluginHost() = host;
  SetLogSink([](void*, int32_t level, const char* message) { PluginHost()->log(level, message); }, nullptr);
  SetLogLevel(static_cast<int32_t>(LogLevel::kDebug));
}

}  // namespace llm42::internal

#define LLM42_DEFINE_BACKEND_PLUGIN(entry)                                                             \
  extern "C" LLM42_PLUGIN_EXPORT const llm42::BackendPlugin* llm42_backend_plugin(                     \
      const llm42::BackendPluginHost* host) {                                                          \
    static const llm42::BackendPlugin plugin = {llm42::kBackendPluginAbi, LLM42_LIBRARY_VERSION, entry}; \
    llm42::internal::AdoptHostLogger(host);                                                            \
    return &plugin;                                                                                    \
  }

#endif  // LLM42_BACKEND_BACKEND_PLUGIN_EXPORT_H_
