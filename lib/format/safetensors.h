#ifndef LLM42_FORMAT_SAFETENSORS_H_
#define LLM42_FORMAT_SAFETENSORS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "lib/util/mapped_file.h"

namespace llm42 {

// One tensor of a .safetensors file: row-major `shape` (outermost first) of `dtype` ("F32",
// "BF16", ...), `n_bytes` at `data` inside the mapping.
struct SafetensorsTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  uint64_t n_bytes = 0;
};

// A memory-mapped .safetensors file (8-byte little-endian header length, a JSON header, the
// data). Open validates every header field: the header's size and JSON, each entry's dtype,
// shape and data_offsets, that sizes agree with shapes, and that the tensors tile the data
// section exactly (no gaps, overlaps or bytes past the end). FORMAT_ERROR names what is wrong.
class SafetensorsFile {
 public:
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);

  const std::string& path() const { return path_; }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* Find(std::string_view name) const;

  // Bytes per element of a safetensors dtype, 0 for unknown names.
  static int64_t DtypeSize(std::string_view dtype);

 private:
  SafetensorsFile() = default;
  std::string path_;
  std::unique_ptr<MappedFile> file_;
  std::vector<SafetensorsTensor> tensors_;
  absl::flat_hash_map<std::string, size_t> index_;
};

}  // namespace llm42

#endif  // LLM42_FORMAT_SAFETENSORS_H_
