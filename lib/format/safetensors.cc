#include "lib/format/safetensors.h"

#include <algorithm>
#include <cstring>

#include "nlohmann/json.hpp"
#include "lib/util/status.h"

namespace llm42 {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100 << 20;  // the format's own limit

}  // namespace

int64_t SafetensorsFile::DtypeSize(std::string_view dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" || dtype == "F8_E5M2") return 1;
  return 0;
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  LLM42_ASSIGN_OR_RETURN(f->file_, MappedFile::Open(path));
  const uint8_t* base = f->file_->data();
  const uint64_t size = f->file_->size();
  if (size < 8) return FormatError(path, ": ", size, " bytes is too short for a safetensors file");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | base[i];
  if (header_len > kMaxHeaderBytes || header_len > size - 8) {
    return FormatError(path, ": header length ", header_len, " does not fit in the file (",
                       size, " bytes)");
  }
  const std::string_view text(reinterpret_cast<const char*>(base + 8), header_len);
  const nlohmann::json header = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) {
    return FormatError(path, ": the header is not a JSON object");
  }
  const uint8_t* data = base + 8 + header_len;
  const uint64_t data_size = size - 8 - header_len;
  struct Span {
    uint64_t begin, end;
    size_t tensor;
  };
  std::vector<Span> spans;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string where = path + ": tensor '" + name + "'";
    if (!entry.is_object()) return FormatError(where, " is not a JSON object");
    const auto dtype = entry.find("dtype");
    const auto shape = entry.find("shape");
    const auto offsets = entry.find("data_offsets");
    if (dtype == entry.end() || !dtype->is_string()) return FormatError(where, " has no string dtype");
    if (shape == entry.end() || !shape->is_array()) return FormatError(where, " has no shape array");
    if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2 ||
        !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned()) {
      return FormatError(where, " has no [begin, end] data_offsets");
    }
    SafetensorsTensor t;
    t.name = name;
    t.dtype = dtype->get<std::string>();
    const int64_t es = DtypeSize(t.dtype);
    if (es == 0) return FormatError(where, " has unknown dtype '", t.dtype, "'");
    uint64_t elements = 1;
    for (const auto& d : *shape) {
      if (!d.is_number_unsigned()) return FormatError(where, " has a shape entry that is not a size");
      const uint64_t n = d.get<uint64_t>();
      if (n > (uint64_t{1} << 40) || (n != 0 && elements > (uint64_t{1} << 50) / n)) {
        return FormatError(where, " has an implausible shape");
      }
      elements *= n;
      t.shape.push_back(static_cast<int64_t>(n));
    }
    const uint64_t begin = (*offsets)[0].get<uint64_t>(), end = (*offsets)[1].get<uint64_t>();
    if (begin > end || end > data_size) {
      return FormatError(where, " has data_offsets [", begin, ", ", end,
                         "] outside the data section (", data_size, " bytes)");
    }
    if (end - begin != elements * static_cast<uint64_t>(es)) {
      return FormatError(where, " holds ", end - begin, " bytes but its shape and dtype need ",
                         elements * static_cast<uint64_t>(es));
    }
    t.data = data + begin;
    t.n_bytes = end - begin;
    spans.push_back(Span{begin, end, f->tensors_.size()});
    f->index_.emplace(t.name, f->tensors_.size());
    f->tensors_.push_back(std::move(t));
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expect = 0;
  for (const Span& s : spans) {
    if (s.begin != expect) {
      return FormatError(path, ": tensor '", f->tensors_[s.tensor].name, "' starts at byte ", s.begin,
                         " of the data section, expected ", expect, " (gap or overlap)");
    }
    expect = s.end;
  }
  if (expect != data_size) {
    return FormatError(path, ": the tensors cover ", expect, " of the data section's ", data_size,
                       " bytes");
  }
  return f;
}

const SafetensorsTensor* SafetensorsFile::Find(std::string_view name) const {
  auto it = index_.find(absl::string_view(name.data(), name.size()));
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace llm42
