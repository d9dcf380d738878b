#ifndef LLM42_MAKER_QUANTIZER_H_
#define LLM42_MAKER_QUANTIZER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "lib/util/ggml_types.h"

namespace llm42 {

// f32 values as `type`'s bytes: f32, f16, bf16, and every block type llm42 computes with (q8_0,
// q4_0, q4_1, q5_0, q5_1, q2_k ... q6_k, iq4_nl, iq4_xs), v.size() a multiple of the type's
// block. For test models (make-model): each block a valid encoding near its values (scales from
// each sub-block's range, integers rounded to nearest), not llama.cpp's search for the best
// scales; tools/bench-llamacpp.sh quantizes with llama-quantize where files must match its bytes.
// Empty for other types.
std::vector<uint8_t> Quantize(std::span<const float> v, GgmlType type);

// True for the types Quantize writes.
bool CanQuantize(GgmlType type);

}  // namespace llm42

#endif  // LLM42_MAKER_QUANTIZER_H_
