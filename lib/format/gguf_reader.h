#ifndef LLM42_FORMAT_GGUF_READER_H_
#define LLM42_FORMAT_GGUF_READER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "lib/util/ggml_types.h"

namespace llm42 {

enum class GgufType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

const char* GgufTypeName(GgufType type);

// One metadata value. Integers of every width are widened (unsigned ones into `uint_value` as
// well as `int_value` when they fit), floats into `float_value`. Arrays keep their element type
// and hold their elements typed by kind, so a 150k-entry vocabulary is one vector of strings.
struct GgufValue {
  GgufType type = GgufType::kUint8;
  int64_t int_value = 0;
  uint64_t uint_value = 0;
  double float_value = 0;
  bool bool_value = false;
  std::string string_value;
  // Arrays.
  GgufType array_type = GgufType::kUint8;
  std::vector<int64_t> int_array;  // integer and bool elements
  std::vector<double> float_array;
  std::vector<std::string> string_array;
  std::vector<GgufValue> nested_array;

  bool is_integer() const;
  bool is_float() const { return type == GgufType::kFloat32 || type == GgufType::kFloat64; }
  size_t array_size() const;
  // Short human-readable rendering (arrays summarized).
  std::string DebugString() const;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // ggml order: dims[0] is the contiguous one
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;  // relative to the data section
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // inside the mapping
  int64_t n_elements() const;
};

class MappedFile;

// A memory-mapped GGUF (v2 or v3) file. Parsing validates every count, length, offset and
// dimension against the file size before allocating or touching memory, so a malformed file
// yields a FORMAT_ERROR (absl kDataLoss) naming the problem.
class GgufFile {
 public:
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // A model assembled in memory with the keys and tensor names GGUF would use (a Hugging Face
  // directory presented as the GGUF it converts to); tensor data stays valid while `storage`
  // lives. FORMAT_ERROR for duplicate keys or tensor names.
  static absl::StatusOr<std::unique_ptr<GgufFile>> FromParts(
      std::string path, std::vector<std::pair<std::string, GgufValue>> metadata,
      std::vector<GgufTensorInfo> tensors, std::shared_ptr<const void> storage);
  ~GgufFile();

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::string& path() const { return path_; }
  size_t file_size() const;

  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  const GgufValue* Find(std::string_view key) const;
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* FindTensor(std::string_view name) const;

  // Typed metadata accessors: NOT_FOUND-free — a missing key is a FORMAT_ERROR naming it, a
  // value of the wrong type too.
  absl::StatusOr<int64_t> GetInt(std::string_view key) const;
  absl::StatusOr<double> GetFloat(std::string_view key) const;
  absl::StatusOr<std::string> GetString(std::string_view key) const;
  int64_t GetIntOr(std::string_view key, int64_t fallback) const;
  double GetFloatOr(std::string_view key, double fallback) const;
  bool GetBoolOr(std::string_view key, bool fallback) const;

 private:
  GgufFile() = default;
  absl::Status Parse();

  std::string path_;
  std::unique_ptr<MappedFile> file_;
  std::shared_ptr<const void> storage_;  // FromParts' tensor memory
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  absl::flat_hash_map<std::string, size_t> metadata_index_;
  std::vector<GgufTensorInfo> tensors_;
  absl::flat_hash_map<std::string, size_t> tensor_index_;
};

}  // namespace llm42

#endif  // LLM42_FORMAT_GGUF_READER_H_
