#include "lib/util/ggml_types.h"

namespace llm42 {

std::optional<GgmlTypeInfo> GetGgmlTypeInfo(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32: return GgmlTypeInfo{"f32", 1, 4, true};
    case GgmlType::kF16: return GgmlTypeInfo{"f16", 1, 2, true};
    case GgmlType::kBF16: return GgmlTypeInfo{"bf16", 1, 2, true};
    case GgmlType::kQ8_0: return GgmlTypeInfo{"q8_0", 32, 34, true};
    case GgmlType::kQ4_0: return GgmlTypeInfo{"q4_0", 32, 18, true};
    case GgmlType::kQ4_1: return GgmlTypeInfo{"q4_1", 32, 20, false};
    case GgmlType::kQ5_0: return GgmlTypeInfo{"q5_0", 32, 22, false};
    case GgmlType::kQ5_1: return GgmlTypeInfo{"q5_1", 32, 24, false};
    case GgmlType::kQ8_1: return GgmlTypeInfo{"q8_1", 32, 36, false};
    case GgmlType::kQ2_K: return GgmlTypeInfo{"q2_k", 256, 84, false};
    case GgmlType::kQ3_K: return GgmlTypeInfo{"q3_k", 256, 110, false};
    case GgmlType::kQ4_K: return GgmlTypeInfo{"q4_k", 256, 144, false};
    case GgmlType::kQ5_K: return GgmlTypeInfo{"q5_k", 256, 176, false};
    case GgmlType::kQ6_K: return GgmlTypeInfo{"q6_k", 256, 210, false};
    case GgmlType::kQ8_K: return GgmlTypeInfo{"q8_k", 256, 292, false};
    case GgmlType::kI8: return GgmlTypeInfo{"i8", 1, 1, false};
    case GgmlType::kI16: return GgmlTypeInfo{"i16", 1, 2, false};
    case GgmlType::kI32: return GgmlTypeInfo{"i32", 1, 4, false};
    case GgmlType::kI64: return GgmlTypeInfo{"i64", 1, 8, false};
    case GgmlType::kF64: return GgmlTypeInfo{"f64", 1, 8, false};
  }
  return std::nullopt;
}

}  // namespace llm42
