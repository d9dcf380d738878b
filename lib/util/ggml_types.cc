#include "lib/util/ggml_types.h"

#include <cctype>
#include <cstddef>

namespace llm42 {
namespace {

// Byte offsets of a block type's f16 fields (scales, minimums).
struct Fields {
  size_t n = 0;
  size_t at[2] = {};
};
Fields F16Fields(GgmlType type) {
  switch (type) {
    case GgmlType::kQ8_0: return {1, {offsetof(BlockQ8_0, scale)}};
    case GgmlType::kQ4_0: return {1, {offsetof(BlockQ4_0, scale)}};
    case GgmlType::kQ4_1: return {2, {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m)}};
    case GgmlType::kQ5_0: return {1, {offsetof(BlockQ5_0, d)}};
    case GgmlType::kQ5_1: return {2, {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)}};
    case GgmlType::kQ2_K: return {2, {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)}};
    case GgmlType::kQ3_K: return {1, {offsetof(BlockQ3_K, d)}};
    case GgmlType::kQ4_K: return {2, {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)}};
    case GgmlType::kQ5_K: return {2, {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)}};
    case GgmlType::kQ6_K: return {1, {offsetof(BlockQ6_K, d)}};
    case GgmlType::kIQ4_NL: return {1, {offsetof(BlockIQ4_NL, d)}};
    case GgmlType::kIQ4_XS: return {1, {offsetof(BlockIQ4_XS, d)}};
    default: return {};
  }
}

}  // namespace

std::optional<GgmlType> GgmlTypeByName(std::string_view name) {
  for (uint32_t id = 0; id < 64; ++id) {
    const std::optional<GgmlTypeInfo> info = GetGgmlTypeInfo(id);
    if (!info || std::string_view(info->name).size() != name.size()) continue;
    bool same = true;
    for (size_t i = 0; i < name.size() && same; ++i) {
      same = std::tolower(static_cast<unsigned char>(name[i])) == info->name[i];
    }
    if (same) return static_cast<GgmlType>(id);
  }
  return std::nullopt;
}

int64_t FirstNonFiniteBlock(GgmlType type, const uint8_t* data, int64_t n_blocks) {
  if (type == GgmlType::kMXFP4) {  // an E8M0 scale of 0xFF is NaN (OCP MX)
    for (int64_t b = 0; b < n_blocks; ++b) {
      if (data[static_cast<size_t>(b) * sizeof(BlockMXFP4)] == 0xFF) return b;
    }
    return -1;
  }
  const Fields fields = F16Fields(type);
  if (fields.n == 0) return -1;
  const auto bytes = static_cast<size_t>(GetGgmlTypeInfo(static_cast<uint32_t>(type))->block_bytes);
  for (int64_t b = 0; b < n_blocks; ++b) {
    for (size_t f = 0; f < fields.n; ++f) {
      uint16_t h;
      std::memcpy(&h, data + static_cast<size_t>(b) * bytes + fields.at[f], 2);
      if ((h & 0x7C00) == 0x7C00) return b;  // exponent all ones: infinity or NaN
    }
  }
  return -1;
}

std::optional<GgmlTypeInfo> GetGgmlTypeInfo(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32: return GgmlTypeInfo{"f32", 1, 4, true};
    case GgmlType::kF16: return GgmlTypeInfo{"f16", 1, 2, true};
    case GgmlType::kBF16: return GgmlTypeInfo{"bf16", 1, 2, true};
    case GgmlType::kQ8_0: return GgmlTypeInfo{"q8_0", 32, 34, true};
    case GgmlType::kQ4_0: return GgmlTypeInfo{"q4_0", 32, 18, true};
    case GgmlType::kQ4_1: return GgmlTypeInfo{"q4_1", 32, 20, true};
    case GgmlType::kQ5_0: return GgmlTypeInfo{"q5_0", 32, 22, true};
    case GgmlType::kQ5_1: return GgmlTypeInfo{"q5_1", 32, 24, true};
    case GgmlType::kQ8_1: return GgmlTypeInfo{"q8_1", 32, 36, false};
    case GgmlType::kQ2_K: return GgmlTypeInfo{"q2_k", 256, 84, true};
    case GgmlType::kQ3_K: return GgmlTypeInfo{"q3_k", 256, 110, true};
    case GgmlType::kQ4_K: return GgmlTypeInfo{"q4_k", 256, 144, true};
    case GgmlType::kQ5_K: return GgmlTypeInfo{"q5_k", 256, 176, true};
    case GgmlType::kQ6_K: return GgmlTypeInfo{"q6_k", 256, 210, true};
    case GgmlType::kQ8_K: return GgmlTypeInfo{"q8_k", 256, 292, false};
    case GgmlType::kIQ2_XXS: return GgmlTypeInfo{"iq2_xxs", 256, 66, false};
    case GgmlType::kIQ2_XS: return GgmlTypeInfo{"iq2_xs", 256, 74, false};
    case GgmlType::kIQ3_XXS: return GgmlTypeInfo{"iq3_xxs", 256, 98, false};
    case GgmlType::kIQ1_S: return GgmlTypeInfo{"iq1_s", 256, 50, false};
    case GgmlType::kIQ4_NL: return GgmlTypeInfo{"iq4_nl", 32, 18, true};
    case GgmlType::kIQ3_S: return GgmlTypeInfo{"iq3_s", 256, 110, false};
    case GgmlType::kIQ2_S: return GgmlTypeInfo{"iq2_s", 256, 82, false};
    case GgmlType::kIQ4_XS: return GgmlTypeInfo{"iq4_xs", 256, 136, true};
    case GgmlType::kIQ1_M: return GgmlTypeInfo{"iq1_m", 256, 56, false};
    case GgmlType::kTQ1_0: return GgmlTypeInfo{"tq1_0", 256, 54, false};
    case GgmlType::kTQ2_0: return GgmlTypeInfo{"tq2_0", 256, 66, false};
    case GgmlType::kMXFP4: return GgmlTypeInfo{"mxfp4", 32, 17, true};
    case GgmlType::kI8: return GgmlTypeInfo{"i8", 1, 1, false};
    case GgmlType::kI16: return GgmlTypeInfo{"i16", 1, 2, false};
    case GgmlType::kI32: return GgmlTypeInfo{"i32", 1, 4, false};
    case GgmlType::kI64: return GgmlTypeInfo{"i64", 1, 8, false};
    case GgmlType::kF64: return GgmlTypeInfo{"f64", 1, 8, false};
  }
  return std::nullopt;
}

}  // namespace llm42
