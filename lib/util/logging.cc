#include "lib/util/logging.h"

#include <atomic>
#include <cstdio>
#include <string>

#include "lib/util/mutex.h"

namespace llm42 {
namespace {

Mutex g_sink_mu;
LogSink g_sink ABSL_GUARDED_BY(g_sink_mu) = nullptr;
void* g_sink_user ABSL_GUARDED_BY(g_sink_mu) = nullptr;
std::atomic<int32_t> g_level{static_cast<int32_t>(LogLevel::kWarning)};

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kError: return "error";
  }
  return "?";
}

}  // namespace

void SetLogSink(LogSink sink, void* user_data) {
  MutexLock lock(&g_sink_mu);
  g_sink = sink;
  g_sink_user = user_data;
}

void SetLogLevel(int32_t level) { g_level.store(level, std::memory_order_relaxed); }

bool LogEnabled(LogLevel level) {
  return static_cast<int32_t>(level) >= g_level.load(std::memory_order_relaxed);
}

void LogMessage(LogLevel level, std::string_view message) {
  const std::string text(message);
  // Held across the call so a sink is never called concurrently and never after it was replaced.
  MutexLock lock(&g_sink_mu);
  if (g_sink != nullptr) {
    g_sink(g_sink_user, static_cast<int32_t>(level), text.c_str());
  } else {
    std::fprintf(stderr, "llm42 %s: %s\n", LevelName(level), text.c_str());
  }
}

}  // namespace llm42
