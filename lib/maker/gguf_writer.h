#ifndef LLM42_MAKER_GGUF_WRITER_H_
#define LLM42_MAKER_GGUF_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "lib/util/ggml_types.h"
#include "lib/format/gguf_reader.h"

namespace llm42 {

// Builds a GGUF v3 file in memory: metadata in insertion order, tensors aligned to
// general.alignment (32). Used by `llm42 make-model` and by tests that need model files.
class GgufWriter {
 public:
  void AddString(const std::string& key, const std::string& value);
  void AddUint32(const std::string& key, uint32_t value);
  void AddInt32(const std::string& key, int32_t value);
  void AddFloat32(const std::string& key, float value);
  void AddBool(const std::string& key, bool value);
  void AddStringArray(const std::string& key, const std::vector<std::string>& values);
  void AddFloat32Array(const std::string& key, const std::vector<float>& values);
  void AddInt32Array(const std::string& key, const std::vector<int32_t>& values);
  void AddBoolArray(const std::string& key, const std::vector<bool>& values);
  // Copies a metadata value read from another file (any type, arrays included).
  void AddValue(const std::string& key, const GgufValue& value);

  // `data` holds the tensor in `type`'s encoding; dims in ggml order.
  void AddTensor(const std::string& name, GgmlType type, const std::vector<int64_t>& dims,
                 std::vector<uint8_t> data);

  std::vector<uint8_t> Serialize() const;
  // Streams the file out (tensors are not copied again).
  absl::Status WriteFile(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> dims;
    std::vector<uint8_t> data;
  };
  std::vector<uint8_t> Header(std::vector<uint64_t>* offsets) const;

  std::vector<uint8_t> kv_bytes_;
  uint64_t n_kv_ = 0;
  std::vector<Tensor> tensors_;
};

}  // namespace llm42

#endif  // LLM42_MAKER_GGUF_WRITER_H_
