#ifndef LLM42_MODEL_FINGERPRINT_H_
#define LLM42_MODEL_FINGERPRINT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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

// A model's cheap identity, for what must not be mixed across models without hashing every weight
// byte (saved conversations): every metadata entry that can change what the model computes, each
// as its key and a StableHash of its value, in file order, and the tensors' names, types, shapes
// and first and last 4 KiB. The metadata is all of it but what describes the file rather than the
// model (MetadataDescribesFile), so a key the forward pass reads is covered whichever architecture
// reads it, including keys of families added later.
struct ModelIdentity {
  std::vector<std::pair<std::string, uint64_t>> metadata;
  uint64_t tensors = 0;
  bool operator==(const ModelIdentity&) const = default;
};
ModelIdentity IdentifyModel(const GgufFile& file);

// Keys that say what a file is rather than what its model computes: general.* but
// general.architecture (names, authors, licences, file type: the tensors' own types are in the
// identity), and the chat templates (tokenizer.chat_template and its named variants).
bool MetadataDescribesFile(std::string_view key);

// Empty when `saved` and `here` identify the same model; else what first differs, for a message:
// "metadata key 'llama.attention.layer_norm_rms_epsilon' has another value", "... is absent
// here", "its tensors differ".
std::string FirstDifference(const ModelIdentity& saved, const ModelIdentity& here);

}  // namespace llm42

#endif  // LLM42_MODEL_FINGERPRINT_H_
