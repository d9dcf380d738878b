#include "lib/maker/gguf_writer.h"

#include <cstdio>
#include <cstring>

#include "lib/util/platform.h"
#include "lib/util/status.h"

namespace llm42 {
namespace {

constexpr uint64_t kAlignment = 32;

template <typename T>
void Put(std::vector<uint8_t>* out, T v) {
  const size_t at = out->size();
  out->resize(at + sizeof(T));
  std::memcpy(out->data() + at, &v, sizeof(T));
}

void PutString(std::vector<uint8_t>* out, const std::string& s) {
  Put<uint64_t>(out, s.size());
  out->insert(out->end(), s.begin(), s.end());
}

void PutType(std::vector<uint8_t>* out, GgufType t) { Put<uint32_t>(out, static_cast<uint32_t>(t)); }

void PutScalar(std::vector<uint8_t>* out, GgufType type, const GgufValue& v, int64_t i, double f) {
  switch (type) {
    case GgufType::kUint8: Put<uint8_t>(out, static_cast<uint8_t>(i)); break;
    case GgufType::kInt8: Put<int8_t>(out, static_cast<int8_t>(i)); break;
    case GgufType::kUint16: Put<uint16_t>(out, static_cast<uint16_t>(i)); break;
    case GgufType::kInt16: Put<int16_t>(out, static_cast<int16_t>(i)); break;
    case GgufType::kUint32: Put<uint32_t>(out, static_cast<uint32_t>(i)); break;
    case GgufType::kInt32: Put<int32_t>(out, static_cast<int32_t>(i)); break;
    case GgufType::kUint64: Put<uint64_t>(out, v.type == type ? v.uint_value : static_cast<uint64_t>(i)); break;
    case GgufType::kInt64: Put<int64_t>(out, i); break;
    case GgufType::kBool: Put<uint8_t>(out, i != 0); break;
    case GgufType::kFloat32: Put<float>(out, static_cast<float>(f)); break;
    case GgufType::kFloat64: Put<double>(out, f); break;
    default: break;
  }
}

void PutValue(std::vector<uint8_t>* out, const GgufValue& v) {
  switch (v.type) {
    case GgufType::kString: PutString(out, v.string_value); return;
    case GgufType::kArray:
      PutType(out, v.array_type);
      Put<uint64_t>(out, v.array_size());
      if (v.array_type == GgufType::kString) {
        for (const auto& s : v.string_array) PutString(out, s);
      } else if (v.array_type == GgufType::kArray) {
        for (const auto& a : v.nested_array) PutValue(out, a);
      } else if (v.array_type == GgufType::kFloat32 || v.array_type == GgufType::kFloat64) {
        for (double f : v.float_array) PutScalar(out, v.array_type, v, 0, f);
      } else {
        for (int64_t i : v.int_array) PutScalar(out, v.array_type, GgufValue{}, i, 0);
      }
      return;
    case GgufType::kBool: Put<uint8_t>(out, v.bool_value); return;
    default: PutScalar(out, v.type, v, v.int_value, v.float_value); return;
  }
}

}  // namespace

void GgufWriter::AddValue(const std::string& key, const GgufValue& value) {
  PutString(&kv_bytes_, key);
  PutType(&kv_bytes_, value.type);
  PutValue(&kv_bytes_, value);
  ++n_kv_;
}

void GgufWriter::AddString(const std::string& key, const std::string& value) {
  GgufValue v;
  v.type = GgufType::kString;
  v.string_value = value;
  AddValue(key, v);
}

void GgufWriter::AddUint32(const std::string& key, uint32_t value) {
  GgufValue v;
  v.type = GgufType::kUint32;
  v.int_value = value;
  AddValue(key, v);
}

void GgufWriter::AddInt32(const std::string& key, int32_t value) {
  GgufValue v;
  v.type = GgufType::kInt32;
  v.int_value = value;
  AddValue(key, v);
}

void GgufWriter::AddFloat32(const std::string& key, float value) {
  GgufValue v;
  v.type = GgufType::kFloat32;
  v.float_value = value;
  AddValue(key, v);
}

void GgufWriter::AddBool(const std::string& key, bool value) {
  GgufValue v;
  v.type = GgufType::kBool;
  v.bool_value = value;
  AddValue(key, v);
}

void GgufWriter::AddStringArray(const std::string& key, const std::vector<std::string>& values) {
  GgufValue v;
  v.type = GgufType::kArray;
  v.array_type = GgufType::kString;
  v.string_array = values;
  AddValue(key, v);
}

void GgufWriter::AddFloat32Array(const std::string& key, const std::vector<float>& values) {
  GgufValue v;
  v.type = GgufType::kArray;
  v.array_type = GgufType::kFloat32;
  v.float_array.assign(values.begin(), values.end());
  AddValue(key, v);
}

void GgufWriter::AddInt32Array(const std::string& key, const std::vector<int32_t>& values) {
  GgufValue v;
  v.type = GgufType::kArray;
  v.array_type = GgufType::kInt32;
  v.int_array.assign(values.begin(), values.end());
  AddValue(key, v);
}

void GgufWriter::AddBoolArray(const std::string& key, const std::vector<bool>& values) {
  GgufValue v;
  v.type = GgufType::kArray;
  v.array_type = GgufType::kBool;
  v.int_array.assign(values.begin(), values.end());
  AddValue(key, v);
}

void GgufWriter::AddTensor(const std::string& name, GgmlType type,
                           const std::vector<int64_t>& dims, std::vector<uint8_t> data) {
  tensors_.push_back(Tensor{name, type, dims, std::move(data)});
}

// Header, metadata and tensor infos, padded to the data section; fills each tensor's offset.
std::vector<uint8_t> GgufWriter::Header(std::vector<uint64_t>* offsets) const {
  std::vector<uint8_t> out;
  Put<uint32_t>(&out, 0x46554747);
  Put<uint32_t>(&out, 3);
  Put<uint64_t>(&out, tensors_.size());
  Put<uint64_t>(&out, n_kv_);
  out.insert(out.end(), kv_bytes_.begin(), kv_bytes_.end());
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    PutString(&out, t.name);
    Put<uint32_t>(&out, static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) Put<uint64_t>(&out, static_cast<uint64_t>(d));
    Put<uint32_t>(&out, static_cast<uint32_t>(t.type));
    Put<uint64_t>(&out, offset);
    offsets->push_back(offset);
    offset += (t.data.size() + kAlignment - 1) / kAlignment * kAlignment;
  }
  out.resize((out.size() + kAlignment - 1) / kAlignment * kAlignment, 0);
  return out;
}

std::vector<uint8_t> GgufWriter::Serialize() const {
  std::vector<uint64_t> offsets;
  std::vector<uint8_t> out = Header(&offsets);
  const size_t data_start = out.size();
  for (size_t i = 0; i < tensors_.size(); ++i) {
    out.resize(data_start + offsets[i]);
    out.insert(out.end(), tensors_[i].data.begin(), tensors_[i].data.end());
  }
  out.resize((out.size() + kAlignment - 1) / kAlignment * kAlignment, 0);
  return out;
}

absl::Status GgufWriter::WriteFile(const std::string& path) const {
  std::vector<uint64_t> offsets;
  const std::vector<uint8_t> header = Header(&offsets);
  std::FILE* f = platform::OpenFile(path, "wb");
  if (f == nullptr) return IoError(path, ": cannot open for writing");
  bool ok = std::fwrite(header.data(), 1, header.size(), f) == header.size();
  static const uint8_t kZeros[kAlignment] = {};
  for (const Tensor& t : tensors_) {
    if (!ok) break;
    ok = std::fwrite(t.data.data(), 1, t.data.size(), f) == t.data.size();
    const size_t pad = (kAlignment - t.data.size() % kAlignment) % kAlignment;
    ok = ok && std::fwrite(kZeros, 1, pad, f) == pad;
  }
  if (std::fclose(f) != 0 || !ok) return IoError(path, ": write failed");
  return absl::OkStatus();
}

}  // namespace llm42
