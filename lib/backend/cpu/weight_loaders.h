#ifndef LLM42_BACKEND_CPU_WEIGHT_LOADERS_H_
#define LLM42_BACKEND_CPU_WEIGHT_LOADERS_H_

// Scalar access to one weight of a row in its storage type, for the portable kernels (row_dot.cc,
// int8_dot.cc) and the embedding lookup.
#include <cstdint>
#include <cstring>

#include "lib/util/ggml_types.h"

namespace llm42::internal {

// Element loaders: weight i of a row as f32.
struct F32Loader {
  static float At(const uint8_t* w, int64_t i) {
    float f;
    std::memcpy(&f, w + 4 * i, 4);
    return f;
  }
};
struct F16Loader {
  static float At(const uint8_t* w, int64_t i) {
    uint16_t h;
    std::memcpy(&h, w + 2 * i, 2);
    return Fp16ToFp32(h);
  }
};
struct Bf16Loader {
  static float At(const uint8_t* w, int64_t i) {
    uint16_t h;
    std::memcpy(&h, w + 2 * i, 2);
    return Bf16ToFp32(h);
  }
};
// Quantized types: weight i is Scale(block) * Q(i), Q an integer.
struct Q8_0Loader {
  static float Q(const uint8_t* w, int64_t i) {
    return static_cast<float>((reinterpret_cast<const BlockQ8_0*>(w) + i / 32)->q[i % 32]);
  }
  static float Scale(const uint8_t* w, int64_t block) {
    return Fp16ToFp32((reinterpret_cast<const BlockQ8_0*>(w) + block)->scale);
  }
  static float At(const uint8_t* w, int64_t i) { return Scale(w, i / 32) * Q(w, i); }
};

struct Q4_0Loader {
  static float Q(const uint8_t* w, int64_t i) {
    const auto* b = reinterpret_cast<const BlockQ4_0*>(w) + i / 32;
    const int64_t j = i % 32;
    return static_cast<float>((j < 16 ? (b->q[j] & 0x0F) : (b->q[j - 16] >> 4)) - 8);
  }
  static float Scale(const uint8_t* w, int64_t block) {
    return Fp16ToFp32((reinterpret_cast<const BlockQ4_0*>(w) + block)->scale);
  }
  static float At(const uint8_t* w, int64_t i) { return Scale(w, i / 32) * Q(w, i); }
};

}  // namespace llm42::internal

#endif  // LLM42_BACKEND_CPU_WEIGHT_LOADERS_H_
