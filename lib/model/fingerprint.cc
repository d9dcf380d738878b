#include "lib/model/fingerprint.h"

#include <algorithm>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "lib/util/stable_hash.h"
#include "lib/util/thread_pool.h"

namespace llm42 {
namespace {

// Appends a value's canonical bytes: its type, then its fields (lengths before strings and
// arrays), little-endian as the machine stores them (x86-64 and ARM64 both are).
void AppendValue(const GgufValue& v, std::string* out) {
  auto put = [out](const void* p, size_t n) { out->append(static_cast<const char*>(p), n); };
  auto put_string = [&](const std::string& s) {
    const uint64_t n = s.size();
    put(&n, sizeof n);
    out->append(s);
  };
  const auto type = static_cast<uint32_t>(v.type);
  put(&type, sizeof type);
  if (v.type == GgufType::kString) {
    put_string(v.string_value);
  } else if (v.type == GgufType::kArray) {
    const auto element = static_cast<uint32_t>(v.array_type);
    const uint64_t n = v.array_size();
    put(&element, sizeof element);
    put(&n, sizeof n);
    for (int64_t x : v.int_array) put(&x, sizeof x);
    for (double x : v.float_array) put(&x, sizeof x);
    for (const std::string& s : v.string_array) put_string(s);
    for (const GgufValue& nested : v.nested_array) AppendValue(nested, out);
  } else if (v.is_float()) {
    put(&v.float_value, sizeof v.float_value);
  } else if (v.type == GgufType::kBool) {
    const uint8_t b = v.bool_value ? 1 : 0;
    put(&b, 1);
  } else {
    put(&v.int_value, sizeof v.int_value);
    put(&v.uint_value, sizeof v.uint_value);
  }
}

}  // namespace

std::string HexOf(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : bytes) {
    hex.push_back(kDigits[c >> 4]);
    hex.push_back(kDigits[c & 15]);
  }
  return hex;
}

ModelFingerprintValue FingerprintModel(const GgufFile& file, int threads) {
  const std::vector<GgufTensorInfo>& tensors = file.tensors();
  std::vector<std::string> digests(tensors.size());
  ThreadPool pool(std::max(1, std::min<int>(threads, static_cast<int>(tensors.size()))));
  pool.ParallelFor(static_cast<int64_t>(tensors.size()), 1, [&](int64_t begin, int64_t end) {
    for (auto i = static_cast<size_t>(begin); i < static_cast<size_t>(end); ++i) {
      digests[i] = Sha256(tensors[i].data, static_cast<size_t>(tensors[i].n_bytes));
    }
  });

  std::string all = "llm42-model-fingerprint-1";
  for (const auto& [key, value] : file.metadata()) {
    const uint64_t len = key.size();
    all.append(reinterpret_cast<const char*>(&len), sizeof len).append(key);
    AppendValue(value, &all);
  }
  ModelFingerprintValue f;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const GgufTensorInfo& t = tensors[i];
    const uint64_t len = t.name.size(), rank = t.dims.size();
    const auto type = static_cast<uint32_t>(t.type);
    all.append(reinterpret_cast<const char*>(&len), sizeof len).append(t.name);
    all.append(reinterpret_cast<const char*>(&type), sizeof type);
    all.append(reinterpret_cast<const char*>(&rank), sizeof rank);
    all.append(reinterpret_cast<const char*>(t.dims.data()), t.dims.size() * sizeof(int64_t));
    all.append(digests[i]);
    f.tensor_bytes += static_cast<int64_t>(t.n_bytes);
  }
  f.tensors = static_cast<int32_t>(tensors.size());
  f.sha256 = HexOf(Sha256(all.data(), all.size()));
  return f;
}

bool MetadataDescribesFile(std::string_view key) {
  return (key.starts_with("general.") && key != "general.architecture") || key == "tokenizer.chat_template" ||
         key.starts_with("tokenizer.chat_template.");
}

ModelIdentity IdentifyModel(const GgufFile& file) {
  ModelIdentity id;
  std::string bytes;
  for (const auto& [key, value] : file.metadata()) {
    if (MetadataDescribesFile(key)) continue;
    bytes.clear();
    AppendValue(value, &bytes);
    id.metadata.emplace_back(key, StableHash().Mix(bytes.data(), bytes.size()).value());
  }
  StableHash h;
  for (const GgufTensorInfo& t : file.tensors()) {
    const size_t n = static_cast<size_t>(t.n_bytes), head = std::min<size_t>(n, 4096);
    const size_t tail = std::min<size_t>(n - head, 4096);
    h.Mix(t.name.data(), t.name.size()).Mix(&t.type, sizeof t.type).Mix(t.dims.data(), t.dims.size() * sizeof(int64_t));
    h.Mix(t.data, head).Mix(t.data + n - tail, tail);
  }
  id.tensors = h.value();
  return id;
}

std::string FirstDifference(const ModelIdentity& saved, const ModelIdentity& here) {
  absl::flat_hash_map<std::string_view, uint64_t> ours;
  for (const auto& [key, hash] : here.metadata) ours.emplace(key, hash);
  absl::flat_hash_map<std::string_view, uint64_t> theirs;
  for (const auto& [key, hash] : saved.metadata) {
    theirs.emplace(key, hash);
    const auto it = ours.find(key);
    if (it == ours.end()) return absl::StrCat("metadata key '", key, "' is absent here");
    if (it->second != hash) return absl::StrCat("metadata key '", key, "' has another value");
  }
  for (const auto& [key, hash] : here.metadata) {
    if (!theirs.contains(key)) return absl::StrCat("metadata key '", key, "' of this model is absent from the saved one");
  }
  return saved.tensors == here.tensors ? std::string() : std::string("its tensors differ");
}

}  // namespace llm42
