#ifndef LLM42_UTIL_MAPPED_FILE_H_
#define LLM42_UTIL_MAPPED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace llm42 {

// A read-only memory mapping of a whole file. NOT_FOUND when the file does not exist,
// IO_ERROR (kUnavailable) when it cannot be opened or mapped.
class MappedFile {
 public:
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  MappedFile(const uint8_t* data, size_t size, uintptr_t handle) : data_(data), size_(size), handle_(handle) {}
  const uint8_t* data_;
  size_t size_;
  uintptr_t handle_;
};

}  // namespace llm42

#endif  // LLM42_UTIL_MAPPED_FILE_H_
