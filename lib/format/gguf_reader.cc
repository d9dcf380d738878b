#include "lib/format/gguf_reader.h"

#include <cstring>
#include <limits>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "lib/util/mapped_file.h"
#include "lib/util/status.h"
#include "lib/util/utf8.h"

namespace llm42 {
namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" little-endian
constexpr int kMaxArrayDepth = 4;
constexpr uint32_t kMaxDims = 4;

// Bounds-checked little-endian cursor over the mapping.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  template <typename T>
  absl::Status Read(T* out, absl::string_view what) {
    if (remaining() < sizeof(T)) {
      return FormatError("truncated file: ", what, " at offset ", pos_, " runs past the end (",
                         size_, " bytes)");
    }
    std::memcpy(out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return absl::OkStatus();
  }

  absl::Status ReadString(std::string* out, absl::string_view what) {
    uint64_t len = 0;
    LLM42_RETURN_IF_ERROR(Read(&len, what));
    if (len > remaining()) {
      return FormatError("truncated file: ", what, " of length ", len, " at offset ", pos_,
                         " runs past the end (", size_, " bytes)");
    }
    out->assign(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return absl::OkStatus();
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Smallest encoding of one value of `type`, to bound element counts before allocating.
uint64_t MinEncodedSize(GgufType type) {
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool: return 1;
    case GgufType::kUint16:
    case GgufType::kInt16: return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32: return 4;
    case GgufType::kString: return 8;
    case GgufType::kArray: return 12;
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64: return 8;
  }
  return 1;
}

bool KnownType(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::kFloat64); }

template <typename T>
absl::Status ReadInt(Cursor& c, GgufValue* v, absl::string_view what) {
  T x{};
  LLM42_RETURN_IF_ERROR(c.Read(&x, what));
  if constexpr (std::is_signed_v<T>) {
    v->int_value = x;
    v->uint_value = x < 0 ? 0 : static_cast<uint64_t>(x);
  } else {
    v->uint_value = x;
    v->int_value = x > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                       ? std::numeric_limits<int64_t>::max()
                       : static_cast<int64_t>(x);
  }
  return absl::OkStatus();
}

absl::Status ReadValue(Cursor& c, GgufType type, GgufValue* v, const std::string& key, int depth);

absl::Status ReadArray(Cursor& c, GgufValue* v, const std::string& key, int depth) {
  if (depth >= kMaxArrayDepth) return FormatError("key '", key, "': arrays nested too deeply");
  uint32_t elem_type = 0;
  uint64_t count = 0;
  LLM42_RETURN_IF_ERROR(c.Read(&elem_type, "array element type"));
  if (!KnownType(elem_type)) {
    return FormatError("key '", key, "': unknown array element type ", elem_type);
  }
  LLM42_RETURN_IF_ERROR(c.Read(&count, "array length"));
  const auto et = static_cast<GgufType>(elem_type);
  if (count > c.remaining() / MinEncodedSize(et)) {
    return FormatError("key '", key, "': array of ", count, " ", GgufTypeName(et),
                       " elements cannot fit in the ", c.remaining(), " bytes left in the file");
  }
  v->array_type = et;
  const size_t n = static_cast<size_t>(count);
  GgufValue elem;
  switch (et) {
    case GgufType::kString:
      v->string_array.resize(n);
      for (size_t i = 0; i < n; ++i) {
        LLM42_RETURN_IF_ERROR(c.ReadString(&v->string_array[i], key));
      }
      break;
    case GgufType::kFloat32:
    case GgufType::kFloat64:
      v->float_array.reserve(n);
      for (size_t i = 0; i < n; ++i) {
        LLM42_RETURN_IF_ERROR(ReadValue(c, et, &elem, key, depth + 1));
        v->float_array.push_back(elem.float_value);
      }
      break;
    case GgufType::kArray:
      v->nested_array.resize(n);
      for (size_t i = 0; i < n; ++i) {
        LLM42_RETURN_IF_ERROR(ReadArray(c, &v->nested_array[i], key, depth + 1));
        v->nested_array[i].type = GgufType::kArray;
      }
      break;
    default:
      v->int_array.reserve(n);
      for (size_t i = 0; i < n; ++i) {
        LLM42_RETURN_IF_ERROR(ReadValue(c, et, &elem, key, depth + 1));
        v->int_array.push_back(et == GgufType::kBool ? elem.bool_value : elem.int_value);
      }
      break;
  }
  return absl::OkStatus();
}

absl::Status ReadValue(Cursor& c, GgufType type, GgufValue* v, const std::string& key,
                       int depth) {
  v->type = type;
  switch (type) {
    case GgufType::kUint8: return ReadInt<uint8_t>(c, v, key);
    case GgufType::kInt8: return ReadInt<int8_t>(c, v, key);
    case GgufType::kUint16: return ReadInt<uint16_t>(c, v, key);
    case GgufType::kInt16: return ReadInt<int16_t>(c, v, key);
    case GgufType::kUint32: return ReadInt<uint32_t>(c, v, key);
    case GgufType::kInt32: return ReadInt<int32_t>(c, v, key);
    case GgufType::kUint64: return ReadInt<uint64_t>(c, v, key);
    case GgufType::kInt64: return ReadInt<int64_t>(c, v, key);
    case GgufType::kFloat32: {
      float f = 0;
      LLM42_RETURN_IF_ERROR(c.Read(&f, key));
      v->float_value = f;
      return absl::OkStatus();
    }
    case GgufType::kFloat64: return c.Read(&v->float_value, key);
    case GgufType::kBool: {
      uint8_t b = 0;
      LLM42_RETURN_IF_ERROR(c.Read(&b, key));
      if (b > 1) return FormatError("key '", key, "': bool value ", int{b}, " is neither 0 nor 1");
      v->bool_value = b != 0;
      return absl::OkStatus();
    }
    case GgufType::kString: return c.ReadString(&v->string_value, key);
    case GgufType::kArray: return ReadArray(c, v, key, depth);
  }
  return FormatError("key '", key, "': unknown value type ", static_cast<uint32_t>(type));
}

}  // namespace

const char* GgufTypeName(GgufType type) {
  static constexpr const char* kNames[] = {"u8",  "i8",  "u16",   "i16", "u32",
                                                "i32", "f32", "bool",  "str", "arr",
                                                "u64", "i64", "f64"};
  const auto t = static_cast<uint32_t>(type);
  return t < std::size(kNames) ? kNames[t] : "?";
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kUint16:
    case GgufType::kInt16:
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kUint64:
    case GgufType::kInt64: return true;
    default: return false;
  }
}

size_t GgufValue::array_size() const {
  return int_array.size() + float_array.size() + string_array.size() + nested_array.size();
}

std::string GgufValue::DebugString() const {
  if (is_integer()) {
    return type == GgufType::kUint64 ? absl::StrCat(uint_value) : absl::StrCat(int_value);
  }
  switch (type) {
    case GgufType::kFloat32:
    case GgufType::kFloat64: return absl::StrFormat("%g", float_value);
    case GgufType::kBool: return bool_value ? "true" : "false";
    case GgufType::kString:
      return string_value.size() > 60 ? absl::StrCat("\"", string_value.substr(0, 57), "...\"")
                                      : absl::StrCat("\"", string_value, "\"");
    case GgufType::kArray: return absl::StrCat("[", GgufTypeName(array_type), " x ", array_size(), "]");
    default: return "?";
  }
}

int64_t GgufTensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

GgufFile::~GgufFile() = default;

size_t GgufFile::file_size() const {
  if (file_) return file_->size();
  size_t bytes = 0;
  for (const GgufTensorInfo& t : tensors_) bytes += t.n_bytes;
  return bytes;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::FromParts(
    std::string path, std::vector<std::pair<std::string, GgufValue>> metadata,
    std::vector<GgufTensorInfo> tensors, std::shared_ptr<const void> storage) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = std::move(path);
  f->version_ = 3;
  f->storage_ = std::move(storage);
  f->metadata_ = std::move(metadata);
  f->tensors_ = std::move(tensors);
  for (size_t i = 0; i < f->metadata_.size(); ++i) {
    if (!f->metadata_index_.emplace(f->metadata_[i].first, i).second) {
      return FormatError(f->path_, ": duplicate key '", f->metadata_[i].first, "'");
    }
  }
  for (size_t i = 0; i < f->tensors_.size(); ++i) {
    if (!f->tensor_index_.emplace(f->tensors_[i].name, i).second) {
      return FormatError(f->path_, ": duplicate tensor '", f->tensors_[i].name, "'");
    }
  }
  return f;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  LLM42_ASSIGN_OR_RETURN(f->file_, MappedFile::Open(path));
  absl::Status s = f->Parse();
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
  return f;
}

absl::Status GgufFile::Parse() {
  Cursor c(file_->data(), file_->size());
  uint32_t magic = 0;
  LLM42_RETURN_IF_ERROR(c.Read(&magic, "magic"));
  if (magic != kGgufMagic) {
    return FormatError(absl::StrFormat("bad magic 0x%08x: not a GGUF file", magic));
  }
  LLM42_RETURN_IF_ERROR(c.Read(&version_, "version"));
  if (version_ != 2 && version_ != 3) {
    return FormatError("unsupported GGUF version ", version_, " (llm42 reads versions 2 and 3)");
  }
  uint64_t n_tensors = 0, n_kv = 0;
  LLM42_RETURN_IF_ERROR(c.Read(&n_tensors, "tensor count"));
  LLM42_RETURN_IF_ERROR(c.Read(&n_kv, "metadata count"));
  // Each key/value takes at least 8 (key length) + 4 (type) + 1 bytes, each tensor info at
  // least 8 + 4 + 8 + 4 + 8.
  if (n_kv > c.remaining() / 13) {
    return FormatError("metadata count ", n_kv, " cannot fit in a file of ", file_->size(),
                       " bytes");
  }
  if (n_tensors > c.remaining() / 32) {
    return FormatError("tensor count ", n_tensors, " cannot fit in a file of ", file_->size(),
                       " bytes");
  }

  metadata_.reserve(static_cast<size_t>(n_kv));
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key;
    LLM42_RETURN_IF_ERROR(c.ReadString(&key, absl::StrCat("metadata key #", i)));
    // Keys reach callers (and the bindings) as strings: text, never arbitrary bytes.
    if (!IsValidUtf8(key)) return FormatError("metadata key #", i, " is not valid UTF-8");
    uint32_t type = 0;
    LLM42_RETURN_IF_ERROR(c.Read(&type, "metadata value type"));
    if (!KnownType(type)) return FormatError("key '", key, "': unknown value type ", type);
    GgufValue value;
    LLM42_RETURN_IF_ERROR(ReadValue(c, static_cast<GgufType>(type), &value, key, 0));
    if (!metadata_index_.emplace(key, metadata_.size()).second) {
      return FormatError("duplicate metadata key '", key, "'");
    }
    metadata_.emplace_back(std::move(key), std::move(value));
  }

  if (const GgufValue* a = Find("general.alignment")) {
    if (!a->is_integer() || a->uint_value == 0 || (a->uint_value & (a->uint_value - 1)) != 0 ||
        a->uint_value > (1u << 20)) {
      return FormatError("general.alignment must be a power of two up to 1 MiB, got ",
                         a->DebugString());
    }
    alignment_ = a->uint_value;
  }

  tensors_.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    LLM42_RETURN_IF_ERROR(c.ReadString(&t.name, absl::StrCat("tensor name #", i)));
    if (!IsValidUtf8(t.name)) return FormatError("tensor name #", i, " is not valid UTF-8");
    uint32_t n_dims = 0;
    LLM42_RETURN_IF_ERROR(c.Read(&n_dims, "tensor dimension count"));
    if (n_dims == 0 || n_dims > kMaxDims) {
      return FormatError("tensor '", t.name, "': ", n_dims, " dimensions (1 to ", kMaxDims,
                         " allowed)");
    }
    uint64_t n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t dim = 0;
      LLM42_RETURN_IF_ERROR(c.Read(&dim, "tensor dimension"));
      if (dim == 0 || dim > (uint64_t{1} << 40)) {
        return FormatError("tensor '", t.name, "': invalid dimension ", dim);
      }
      if (n_elements > (uint64_t{1} << 44) / dim) {
        return FormatError("tensor '", t.name, "': element count overflows");
      }
      n_elements *= dim;
      t.dims.push_back(static_cast<int64_t>(dim));
    }
    uint32_t type = 0;
    LLM42_RETURN_IF_ERROR(c.Read(&type, "tensor type"));
    const auto info = GetGgmlTypeInfo(type);
    if (!info) return FormatError("tensor '", t.name, "': unknown ggml type ", type);
    t.type = static_cast<GgmlType>(type);
    if (t.dims[0] % info->block_size != 0) {
      return FormatError("tensor '", t.name, "': first dimension ", t.dims[0],
                         " is not a multiple of the ", info->name, " block size ",
                         info->block_size);
    }
    t.n_bytes = n_elements / static_cast<uint64_t>(info->block_size) *
                static_cast<uint64_t>(info->block_bytes);
    LLM42_RETURN_IF_ERROR(c.Read(&t.offset, "tensor offset"));
    if (t.offset % alignment_ != 0) {
      return FormatError("tensor '", t.name, "': offset ", t.offset, " is not aligned to ",
                         alignment_);
    }
    if (!tensor_index_.emplace(t.name, tensors_.size()).second) {
      return FormatError("duplicate tensor '", t.name, "'");
    }
    tensors_.push_back(std::move(t));
  }

  const uint64_t data_start = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  const uint64_t size = file_->size();
  if (n_tensors > 0 && data_start > size) {
    return FormatError("truncated file: data section at ", data_start, " starts past the end (",
                       size, " bytes)");
  }
  for (GgufTensorInfo& t : tensors_) {
    if (t.offset > size || t.n_bytes > size || data_start + t.offset > size - t.n_bytes) {
      return FormatError("tensor '", t.name, "' (", t.n_bytes, " bytes at data offset ",
                         t.offset, ") lies outside the file (", size, " bytes)");
    }
    t.data = file_->data() + data_start + t.offset;
  }
  return absl::OkStatus();
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = metadata_index_.find(absl::string_view(key.data(), key.size()));
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(absl::string_view(name.data(), name.size()));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

absl::StatusOr<int64_t> GgufFile::GetInt(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return FormatError("missing required key '", std::string(key), "'");
  if (!v->is_integer()) {
    return FormatError("key '", std::string(key), "' has type ", GgufTypeName(v->type), ", expected an integer");
  }
  return v->int_value;
}

absl::StatusOr<double> GgufFile::GetFloat(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return FormatError("missing required key '", std::string(key), "'");
  if (v->is_float()) return v->float_value;
  if (v->is_integer()) return static_cast<double>(v->int_value);
  return FormatError("key '", std::string(key), "' has type ", GgufTypeName(v->type), ", expected a number");
}

absl::StatusOr<std::string> GgufFile::GetString(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return FormatError("missing required key '", std::string(key), "'");
  if (v->type != GgufType::kString) {
    return FormatError("key '", std::string(key), "' has type ", GgufTypeName(v->type), ", expected a string");
  }
  return v->string_value;
}

int64_t GgufFile::GetIntOr(std::string_view key, int64_t fallback) const {
  const GgufValue* v = Find(key);
  return v != nullptr && v->is_integer() ? v->int_value : fallback;
}

double GgufFile::GetFloatOr(std::string_view key, double fallback) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return fallback;
  if (v->is_float()) return v->float_value;
  return v->is_integer() ? static_cast<double>(v->int_value) : fallback;
}

bool GgufFile::GetBoolOr(std::string_view key, bool fallback) const {
  const GgufValue* v = Find(key);
  return v != nullptr && v->type == GgufType::kBool ? v->bool_value : fallback;
}

}  // namespace llm42
