#ifndef LLM42_UTIL_LOGGING_H_
#define LLM42_UTIL_LOGGING_H_

#include <cstdint>
#include <string_view>

#include "absl/strings/str_cat.h"

namespace llm42 {

enum class LogLevel : int32_t { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

using LogSink = void (*)(void* user_data, int32_t level, const char* message);

// Process-wide log routing; thread-safe. A null sink restores the stderr default.
void SetLogSink(LogSink sink, void* user_data);
void SetLogLevel(int32_t level);
bool LogEnabled(LogLevel level);
void LogMessage(LogLevel level, std::string_view message);

template <typename... Args>
void Log(LogLevel level, const Args&... args) {
  if (LogEnabled(level)) LogMessage(level, absl::StrCat(args...));
}

}  // namespace llm42

#endif  // LLM42_UTIL_LOGGING_H_
