#ifndef LLM42_UTIL_STATUS_H_
#define LLM42_UTIL_STATUS_H_

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

// llm42 statuses travel as absl::Status inside the library. The codes that have no absl
// namesake are mapped onto these, once, here and in c_api's conversion:
//   LLM42_FORMAT_ERROR <-> kDataLoss, LLM42_IO_ERROR <-> kUnavailable,
//   LLM42_UNSUPPORTED <-> kUnimplemented, LLM42_TIMEOUT <-> kDeadlineExceeded.
namespace llm42 {

template <typename... Args>
absl::Status FormatError(const Args&... args) {
  return absl::DataLossError(absl::StrCat(args...));
}
template <typename... Args>
absl::Status IoError(const Args&... args) {
  return absl::UnavailableError(absl::StrCat(args...));
}
template <typename... Args>
absl::Status UnsupportedError(const Args&... args) {
  return absl::UnimplementedError(absl::StrCat(args...));
}
template <typename... Args>
absl::Status InvalidArgument(const Args&... args) {
  return absl::InvalidArgumentError(absl::StrCat(args...));
}
template <typename... Args>
absl::Status OutOfRange(const Args&... args) {
  return absl::OutOfRangeError(absl::StrCat(args...));
}

}  // namespace llm42

#define LLM42_RETURN_IF_ERROR(expr)            \
  do {                                         \
    ::absl::Status llm42_status_ = (expr);     \
    if (!llm42_status_.ok()) return llm42_status_; \
  } while (0)

#define LLM42_CONCAT_INNER_(a, b) a##b
#define LLM42_CONCAT_(a, b) LLM42_CONCAT_INNER_(a, b)
#define LLM42_ASSIGN_OR_RETURN(lhs, expr) \
  LLM42_ASSIGN_OR_RETURN_IMPL_(LLM42_CONCAT_(llm42_statusor_, __LINE__), lhs, expr)
#define LLM42_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()

#endif  // LLM42_UTIL_STATUS_H_
