#ifndef LLM42_BACKEND_CPU_KQUANT_GEMV_H_
#define LLM42_BACKEND_CPU_KQUANT_GEMV_H_

#include <cstddef>
#include <cstdint>

#include "lib/util/ggml_types.h"

namespace llm42::internal {

// fast's decode GEMV for Q4_K, Q5_K, Q6_K, IQ4_XS and MXFP4 weights on AVX-512 VNNI: whole sub-block
// integer products against activations rounded to 8 bits per 256 values, as llama.cpp decodes
// these types. The weights' unsigned integers (Q4_K's nibbles, Q5_K's five bits, Q6_K's six
// before their -32, IQ4_XS's table values plus 128) go to dpbusd against the activation bytes;
// each sub-block's products are multiplied by its integer scale in the integer lanes; per
// super-block one conversion and fused multiply-add by d * the activation scale, and the mins
// (Q4_K, Q5_K) or the offset (Q6_K's -32, IQ4_XS's +128) from the activation's sums of 16. MXFP4's
// blocks of 32 (table magnitudes, the activation negated under negative weights) each take their
// own E8M0 scale times the activation's, in f32 lanes; its rows need not be whole records of 256
// (gpt-oss's width is 2880: the last record is partial, zeros after the row's values). No weight is converted to f32: decode of these types
// was bound by that conversion (format_gemv.h; MXFP4 0.11 of the bandwidth floor before it).
//
// fast only: the activation rounding moves the result by up to half an activation step per
// value, so these rows do not have the fixed family's bits (fixed keeps format_gemv.h's
// arithmetic on the exact f32 values; a deterministic request's candidates decoded here are
// verified against it like any fast row's).

// One activation row's 256 values: q = x / d rounded to nearest (the SIMD conversion's rule),
// d = max|x| / 127, and the sums of each 16 q.
struct alignas(64) ActivationQ8K {
  int8_t q[256];
  int16_t bsums[16];
  float d;
};

// Whether the CPU has AVX-512 VNNI (and LLM42_CPU_SIMD is not off, allow_simd) and `type` is
// Q4_K, Q5_K, Q6_K, IQ4_XS or MXFP4.
bool KQuantGemvAvailable(GgmlType type, bool allow_simd = true);

// Records of a row of k values: k / 256, rounded up.
inline int64_t Q8KRecords(int64_t k) { return (k + 255) / 256; }

// Row x of k values into Q8KRecords(k) records (a last partial one padded with zeros: its d that
// of its values). Needs KQuantGemvAvailable.
void QuantizeQ8K(const float* x, int64_t k, ActivationQ8K* out);

// out[j][r] = dot(weight row r, activation row x[j]) for n_rows consecutive rows of `type` (row r
// at w + r * row_bytes) and n_x activation rows (each k / 256 records): a decode batch, each
// weight super-block (MXFP4: pair of blocks) unpacked once for four activation rows at a time. A row's result does not
// depend on n_x or its place among them. Needs KQuantGemvAvailable(type).
void KQuantGemv(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t n_rows, const ActivationQ8K* const* x,
                int64_t n_x, int64_t k, float* const* out);

}  // namespace llm42::internal

#endif  // LLM42_BACKEND_CPU_KQUANT_GEMV_H_
