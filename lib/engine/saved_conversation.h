#ifndef LLM42_ENGINE_SAVED_CONVERSATION_H_
#define LLM42_ENGINE_SAVED_CONVERSATION_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/model/fingerprint.h"

namespace llm42 {

// A conversation written to a file (a save game, a desktop app's restart): its tokens, its chat
// messages, and the K/V of the full blocks the session's cache held for it, with what they were
// computed by. Loading puts those blocks back into a session's prefix cache, so a continuation
// does not prefill them, and a deterministic continuation gives the bits it would have given in
// the original session.
//
// The file: the magic "LLM42CV3", then little-endian fields (strings and arrays prefixed by a
// u64 length) in the order of the struct below (format 2, "LLM42CV2", still read: without
// kv_block_bytes and state) (the model's metadata as a u64 count of key
// strings each followed by its u64 hash), then an FNV-1a 64 checksum of every byte before it. A
// wrong magic, a short file, a bad checksum or inconsistent sizes are DataLoss (FORMAT_ERROR in
// the C ABI); a file of format 1 ("LLM42CV1", whose model identity left the metadata out) is
// FailedPrecondition. Our own format rather than Protobuf: the payload is hundreds of megabytes of K/V
// written and read in place, and the header is a dozen fixed fields.
struct SavedConversation {
  // What produced the K/V; a session loads only a file whose fields all equal its own.
  ModelIdentity model;        // Session::model_identity(): its metadata and tensors (fingerprint.h)
  std::string llm42_version;  // informational: kernels of another version are caught by model and schedule fields
  uint32_t schedule_version = 0;
  std::string backend;
  std::string kv_dtype;
  int32_t block_size = 0;
  int64_t n_layers = 0;
  int64_t kv_dim = 0;
  int64_t kv_element_bytes = 0;
  // One block's K/V bytes, every storage layer at its own width (format 3; a format-2 file's
  // blocks are n_layers * 2 * block_size * kv_dim elements: kv_block_bytes 0).
  int64_t kv_block_bytes = 0;

  std::vector<int32_t> tokens;
  std::vector<std::pair<std::string, std::string>> messages;  // role, content; empty unless a chat
  // The first block_fixed.size() blocks of `tokens`: whether each was computed under fixed, and
  // their K/V (block_bytes() each, the backend's layout).
  std::vector<uint8_t> block_fixed;
  std::vector<uint8_t> kv;
  // A model with recurrent layers (format 3): their state after the last block (the backend's
  // slot, RecurrentShape::slot_floats values; empty: none kept).
  std::vector<float> state;

  size_t block_bytes() const {
    return static_cast<size_t>(kv_block_bytes > 0 ? kv_block_bytes : n_layers * 2 * block_size * kv_dim * kv_element_bytes);
  }
  bool operator==(const SavedConversation&) const = default;
};

// OK when `saved` was produced by the setup `here` describes (every field above the
// conversation's own but llm42_version); else FailedPrecondition naming the first that differs.
absl::Status CheckSameSetup(const SavedConversation& saved, const SavedConversation& here, const std::string& path);

absl::Status WriteSavedConversation(const std::string& path, const SavedConversation& c);
// NotFound when the file is missing; DataLoss when it is not an intact saved conversation.
absl::StatusOr<SavedConversation> ReadSavedConversation(const std::string& path);

}  // namespace llm42

#endif  // LLM42_ENGINE_SAVED_CONVERSATION_H_
