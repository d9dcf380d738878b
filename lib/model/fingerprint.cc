#include "lib/model/fingerprint.h"

#include <algorithm>
#include <vector>

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

}  // namespace llm42
