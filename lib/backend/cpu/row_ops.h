#ifndef LLM42_BACKEND_CPU_ROW_OPS_H_
#define LLM42_BACKEND_CPU_ROW_OPS_H_

#include <cstdint>

namespace llm42::internal {

// The CPU backend's element-wise steps, both schedules. Each output is one element's IEEE
// operations in the order written below, so the 16-lane AVX-512 loops (where allow_simd and the
// CPU has them) give the scalar loops' bits; GCC 12 at -O2 left the scalar loops unvectorized
// (one element per instruction: SwiGLU, the norms' scaling and the residual additions took 4-5 %
// of a llama-110m pp512).

// y[j] = x[j] * scale * w[j] (the product left to right), j < n: RMSNorm's output.
void ScaleByWeights(const float* x, float scale, const float* w, int64_t n, float* y, bool allow_simd);

// y[j] += x[j], j < n.
void AddInPlace(float* y, const float* x, int64_t n, bool allow_simd);

// out[j] = gate[j] / (1 + e[j]) * up[j], j < n (e[j] = e^-gate[j]): SwiGLU's last step. out may
// be gate or up.
void SwiGluFinish(const float* gate, const float* up, const float* e, int64_t n, float* out, bool allow_simd);

// y[j] = -x[j], j < n.
void Negate(const float* x, int64_t n, float* y, bool allow_simd);

}  // namespace llm42::internal

#endif  // LLM42_BACKEND_CPU_ROW_OPS_H_
