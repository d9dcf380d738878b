#include "lib/engine/saved_conversation.h"

#include <cstring>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "lib/util/platform.h"
#include "lib/util/stable_hash.h"

namespace llm42 {
namespace {

constexpr char kMagic[8] = {'L', 'L', 'M', '4', '2', 'C', 'V', '3'};
constexpr char kMagicV2[8] = {'L', 'L', 'M', '4', '2', 'C', 'V', '2'};
constexpr char kMagicV1[8] = {'L', 'L', 'M', '4', '2', 'C', 'V', '1'};

uint64_t Checksum(const char* p, size_t n) { return StableHash().Mix(p, n).value(); }

class Writer {
 public:
  template <typename T>
  void Put(T v) {
    out_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  // n elements of elem bytes, prefixed by n.
  void Array(const void* p, size_t n, size_t elem) {
    Put<uint64_t>(n);
    out_.append(static_cast<const char*>(p), n * elem);
  }
  void Str(const std::string& s) { Array(s.data(), s.size(), 1); }
  std::string& out() { return out_; }

 private:
  std::string out_;
};

class Reader {
 public:
  Reader(const char* p, size_t n) : p_(p), end_(p + n) {}
  template <typename T>
  bool Get(T* v) {
    if (static_cast<size_t>(end_ - p_) < sizeof(T)) return false;
    std::memcpy(v, p_, sizeof(T));
    p_ += sizeof(T);
    return true;
  }
  // A length-prefixed run of n * elem bytes, at most what is left.
  bool Span(size_t elem, const char** data, size_t* n) {
    uint64_t len;
    if (!Get(&len) || len > static_cast<uint64_t>(end_ - p_) / elem) return false;
    *data = p_;
    *n = static_cast<size_t>(len);
    p_ += len * elem;
    return true;
  }
  bool Str(std::string* s) {
    const char* d;
    size_t n;
    if (!Span(1, &d, &n)) return false;
    s->assign(d, n);
    return true;
  }
  bool done() const { return p_ == end_; }

 private:
  const char* p_;
  const char* end_;
};

}  // namespace

absl::Status WriteSavedConversation(const std::string& path, const SavedConversation& c) {
  Writer w;
  w.out().append(kMagic, sizeof kMagic);
  w.Put<uint64_t>(c.model.metadata.size());
  for (const auto& [key, hash] : c.model.metadata) {
    w.Str(key);
    w.Put(hash);
  }
  w.Put(c.model.tensors);
  w.Str(c.llm42_version);
  w.Put(c.schedule_version);
  w.Str(c.backend);
  w.Str(c.kv_dtype);
  w.Put(c.block_size);
  w.Put(c.n_layers);
  w.Put(c.kv_dim);
  w.Put(c.kv_element_bytes);
  w.Put(c.kv_block_bytes);
  w.Array(c.tokens.data(), c.tokens.size(), sizeof(int32_t));
  w.Put<uint64_t>(c.messages.size());
  for (const auto& [role, content] : c.messages) {
    w.Str(role);
    w.Str(content);
  }
  w.Array(c.block_fixed.data(), c.block_fixed.size(), 1);
  w.Array(c.kv.data(), c.kv.size(), 1);
  w.Array(c.state.data(), c.state.size(), sizeof(float));
  w.Put(Checksum(w.out().data(), w.out().size()));
  std::ofstream f(platform::Utf8Path(path), std::ios::binary | std::ios::trunc);
  if (!f) return absl::UnavailableError(absl::StrCat("cannot create ", path));
  f.write(w.out().data(), static_cast<std::streamsize>(w.out().size()));
  f.close();
  if (!f) return absl::UnavailableError(absl::StrCat("cannot write ", path, " (disk full?)"));
  return absl::OkStatus();
}

absl::Status CheckSameSetup(const SavedConversation& saved, const SavedConversation& here, const std::string& path) {
  absl::Status st;
  auto same = [&](const char* what, const auto& a, const auto& b) {
    if (st.ok() && !(a == b)) {
      st = absl::FailedPreconditionError(
          absl::StrCat(path, " was saved with another ", what, " (", a, " where this session has ", b, ")"));
    }
  };
  if (const std::string differs = FirstDifference(saved.model, here.model); !differs.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " was saved with another model: ", differs));
  }
  same("fixed-schedule version", saved.schedule_version, here.schedule_version);
  same("backend", saved.backend, here.backend);
  same("KV type", saved.kv_dtype, here.kv_dtype);
  same("KV element size", saved.kv_element_bytes, here.kv_element_bytes);
  same("KV block size", saved.block_size, here.block_size);
  same("layer count", saved.n_layers, here.n_layers);
  same("KV width", saved.kv_dim, here.kv_dim);
  same("KV block size in bytes", saved.block_bytes(), here.block_bytes());
  return st;
}

absl::StatusOr<SavedConversation> ReadSavedConversation(const std::string& path) {
  std::ifstream f(platform::Utf8Path(path), std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  const std::string bytes{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  auto bad = [&](const char* why) {
    return absl::DataLossError(absl::StrCat(path, " is not an intact llm42 saved conversation: ", why));
  };
  if (bytes.size() >= sizeof kMagicV1 && std::memcmp(bytes.data(), kMagicV1, sizeof kMagicV1) == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " was saved by an earlier llm42 (saved-conversation format 1), whose model identity left out "
                           "the model's metadata, so it cannot be checked against this model; save the conversation "
                           "again with this version"));
  }
  if (bytes.size() < sizeof kMagic + sizeof(uint64_t) ||
      (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0 && std::memcmp(bytes.data(), kMagicV2, sizeof kMagic) != 0)) {
    return bad("wrong magic or too short");
  }
  const bool v3 = std::memcmp(bytes.data(), kMagic, sizeof kMagic) == 0;
  const size_t body = bytes.size() - sizeof(uint64_t);
  uint64_t stored;
  std::memcpy(&stored, bytes.data() + body, sizeof stored);
  if (stored != Checksum(bytes.data(), body)) return bad("checksum mismatch (truncated or altered)");
  Reader r(bytes.data() + sizeof kMagic, body - sizeof kMagic);
  SavedConversation c;
  const char* d;
  size_t n;
  uint64_t n_messages, n_keys;
  if (!r.Get(&n_keys) || n_keys > body) return bad("model metadata");
  for (uint64_t i = 0; i < n_keys; ++i) {
    std::string key;
    uint64_t hash;
    if (!r.Str(&key) || !r.Get(&hash)) return bad("model metadata");
    c.model.metadata.emplace_back(std::move(key), hash);
  }
  bool ok = r.Get(&c.model.tensors) && r.Str(&c.llm42_version) && r.Get(&c.schedule_version) && r.Str(&c.backend) &&
            r.Str(&c.kv_dtype) && r.Get(&c.block_size) && r.Get(&c.n_layers) && r.Get(&c.kv_dim) &&
            r.Get(&c.kv_element_bytes) && (!v3 || r.Get(&c.kv_block_bytes)) && r.Span(sizeof(int32_t), &d, &n);
  if (!ok) return bad("header");
  c.tokens.resize(n);
  if (n > 0) std::memcpy(c.tokens.data(), d, n * sizeof(int32_t));  // data() may be null when empty
  if (!r.Get(&n_messages) || n_messages > body) return bad("messages");
  for (uint64_t i = 0; i < n_messages; ++i) {
    std::string role, content;
    if (!r.Str(&role) || !r.Str(&content)) return bad("messages");
    c.messages.emplace_back(std::move(role), std::move(content));
  }
  if (!r.Span(1, &d, &n)) return bad("blocks");
  c.block_fixed.assign(d, d + n);
  if (!r.Span(1, &d, &n)) return bad("K/V");
  c.kv.assign(d, d + n);
  if (v3) {
    if (!r.Span(sizeof(float), &d, &n)) return bad("recurrent state");
    c.state.resize(n);
    if (n > 0) std::memcpy(c.state.data(), d, n * sizeof(float));
  }
  if (!r.done()) return bad("trailing bytes");
  if (c.block_size <= 0 || c.block_size > 64 || c.n_layers <= 0 || c.n_layers > 4096 || c.kv_dim <= 0 ||
      c.kv_dim > (int64_t{1} << 24) || c.kv_element_bytes <= 0 || c.kv_element_bytes > 8 || c.kv_block_bytes < 0 ||
      c.kv_block_bytes > (int64_t{1} << 40) || (!c.state.empty() && c.block_fixed.empty()) ||
      c.kv.size() != c.block_fixed.size() * c.block_bytes() ||
      c.block_fixed.size() * static_cast<size_t>(c.block_size) > c.tokens.size()) {
    return bad("inconsistent sizes");
  }
  return c;
}

}  // namespace llm42
