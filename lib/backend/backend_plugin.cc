#include "lib/backend/backend_plugin.h"

#include <cstdlib>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "lib/util/version.h"
#include "lib/util/logging.h"
#include "lib/util/mutex.h"
#include "lib/util/platform.h"
#include "lib/util/status.h"

namespace llm42 {
namespace {

void HostLog(int32_t level, const char* message) { LogMessage(static_cast<LogLevel>(level), message); }

const BackendPluginHost kHost = {HostLog};

}  // namespace

std::filesystem::path BackendPluginFileName(std::string_view name) {
#if defined(_WIN32)
  return std::filesystem::path(absl::StrCat("llm42-", std::string(name), ".dll"));
#else
  return std::filesystem::path(absl::StrCat("libllm42-", std::string(name), ".so"));
#endif
}

std::filesystem::path FindBackendPlugin(std::string_view name) {
  const std::filesystem::path file = BackendPluginFileName(name);
  if (const char* dir = std::getenv("LLM42_PLUGIN_DIR"); dir != nullptr && *dir != '\0') {
    return platform::Utf8Path(dir) / file;
  }
  const std::filesystem::path here = platform::ModulePathOf(reinterpret_cast<const void*>(&FindBackendPlugin)).parent_path();
  for (const std::filesystem::path& dir : {here, here.parent_path() / "lib"}) {
    std::error_code ec;
    if (std::filesystem::exists(dir / file, ec)) return dir / file;
  }
  return here / file;
}

absl::StatusOr<const BackendEntry*> LoadBackendPlugin(const std::filesystem::path& path) {
  static Mutex& mu = *new Mutex;
  static auto& loaded = *new std::map<std::filesystem::path, absl::StatusOr<const BackendEntry*>>();
  MutexLock lock(&mu);
  if (auto it = loaded.find(path); it != loaded.end()) return it->second;
  const std::string shown = platform::PathUtf8(path);
  auto load = [&]() -> absl::StatusOr<const BackendEntry*> {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return UnsupportedError("no backend plug-in at ", shown);
    std::string error;
    const uintptr_t library = platform::OpenLibrary(path, &error);
    if (library == 0) return UnsupportedError("the backend plug-in ", shown, " cannot be loaded: ", error);
    auto entry = reinterpret_cast<BackendPluginEntryFn>(platform::LibrarySymbol(library, kBackendPluginEntry));
    if (entry == nullptr) {
      platform::CloseLibrary(library);
      return UnsupportedError(shown, " is not an llm42 backend plug-in (no ", kBackendPluginEntry, ")");
    }
    const BackendPlugin* plugin = entry(&kHost);
    if (plugin == nullptr || plugin->abi != kBackendPluginAbi ||
        std::string_view(plugin->llm42_version) != kLibraryVersion) {
      const std::string theirs = plugin == nullptr ? std::string("unknown")
                                                   : absl::StrCat(plugin->llm42_version, " (plug-in ABI ", plugin->abi, ")");
      // Left loaded: its code may hold state that unloading would tear down mid-use.
      return UnsupportedError("the backend plug-in ", shown, " is from llm42 ", theirs, "; this libllm42 is ",
                              kLibraryVersion, " (plug-in ABI ", kBackendPluginAbi, ")");
    }
    Log(LogLevel::kInfo, "backend plug-in ", plugin->entry.name, " loaded from ", shown);
    return &plugin->entry;
  };
  return loaded.emplace(path, load()).first->second;
}

}  // namespace llm42
