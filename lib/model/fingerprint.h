#ifndef LLM42_MODEL_FINGERPRINT_H_
#define LLM42_MODEL_FINGERPRINT_H_

#include <cstdint>
#include <string>

#include "lib/format/gguf_reader.h"
#include "lib/util/sha256.h"

namespace llm42 {

struct ModelFingerprintValue {
  std::string sha256;        // 64 hex digits
  int64_t tensor_bytes = 0;  // bytes of tensor data hashed
  int32_t tensors = 0;
};

// A SHA-256 over everything in a model that can change what it computes: every metadata entry
// (key, type, value) in file order, then every tensor's name, type, dimensions and data in file
// order. Each tensor's data is hashed on its own (in parallel, one tensor per thread at a time)
// and the top-level hash takes the tensors' digests, so the result does not depend on the thread
// count. Hugging Face directories are fingerprinted as the GGUF they are presented as. Costs one
// read of every weight byte: measured in docs/receipts.md (about 1.5 GB/s per core with SHA-NI).
ModelFingerprintValue FingerprintModel(const GgufFile& file, int threads);

std::string HexOf(const std::string& bytes);

}  // namespace llm42

#endif  // LLM42_MODEL_FINGERPRINT_H_
