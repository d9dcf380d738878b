#ifndef LLM42_BACKEND_BACKEND_H_
#define LLM42_BACKEND_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "lib/model/ggml_types.h"

namespace llm42 {

// A weight matrix as stored in the model file: `rows` output rows of `cols` inputs each, every
// row contiguous (ggml order: dims[0] = cols, dims[1] = rows).
struct WeightMatrix {
  GgmlType type = GgmlType::kF32;
  const uint8_t* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  size_t row_bytes = 0;
  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes; }
};

// Where each token of a batch reads its keys and values: its sequence's cache for the current
// layer, positions [0, positions[i]] valid (the token's own K/V already written).
struct AttentionInput {
  int64_t n_tokens = 0;
  const int32_t* positions = nullptr;
  const float* const* k = nullptr;  // per token: [context][n_head_kv * head_dim]
  const float* const* v = nullptr;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
};

// The compute operations the Llama graph is written over. Activations are f32, row-major
// [tokens][features]. The CPU backend is the reference and is always built.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;

  // y[m][w.rows] = x[m][w.cols] * w^T.
  virtual void MatMul(const float* x, int64_t m, const WeightMatrix& w, float* y) = 0;
  // y = x / sqrt(mean(x^2) + eps) * weight, per row of n.
  virtual void RmsNorm(const float* x, const float* weight, int64_t m, int64_t n, float eps,
                       float* y) = 0;
  // Rotates adjacent pairs of the first n_rot dims of every head in place (GGUF/ggml "normal"
  // RoPE), angle position * base^(-2i/n_rot).
  virtual void Rope(float* x, int64_t m, int64_t n_heads, int64_t head_dim, int64_t n_rot,
                    const int32_t* positions, float freq_base) = 0;
  // Causal grouped-query attention: out[i] = softmax(q[i] K^T / sqrt(d)) V over the token's KV
  // prefix, per head.
  virtual void Attention(const float* q, const AttentionInput& in, float* out) = 0;
  // out = silu(gate) * up, elementwise over n values.
  virtual void SwiGlu(const float* gate, const float* up, int64_t n, float* out) = 0;
  // out[i] = table row tokens[i], as f32.
  virtual void Embed(const WeightMatrix& table, const int32_t* tokens, int64_t m, float* out) = 0;
};

}  // namespace llm42

#endif  // LLM42_BACKEND_BACKEND_H_
