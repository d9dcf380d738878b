#ifndef LLM42_BACKEND_BACKEND_H_
#define LLM42_BACKEND_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "lib/model/ggml_types.h"

namespace llm42 {

// How an op may compute (DESIGN.md §2).
enum class Schedule {
  // As fast as possible; results may depend on batch size and composition, thread count and
  // how work was split.
  kFast,
  // A row's result depends only on that row's inputs and its own KV prefix: not on the batch,
  // the row's place in it, thread count, chunk boundaries, prefill versus decode, or the
  // machine's SIMD width.
  kFixed,
};

// The schedule of each row of a batch: one for all rows, or one per row (deterministic requests
// verify under fixed in the same pass that decodes everyone else under fast). Converts from a
// single Schedule.
class Schedules {
 public:
  Schedules(Schedule all) : all_(all) {}  // NOLINT: implicit on purpose
  explicit Schedules(const Schedule* per_row) : per_row_(per_row) {}
  Schedule operator[](int64_t row) const { return per_row_ != nullptr ? per_row_[row] : all_; }
  bool uniform() const { return per_row_ == nullptr; }

 private:
  Schedule all_ = Schedule::kFast;
  const Schedule* per_row_ = nullptr;
};

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

// One layer of a paged KV cache: position p of a sequence with block table T lives in block
// T[p / block_size], row p % block_size; its keys start at
// base + T[p / block_size] * block_stride + (p % block_size) * kv_dim, its values v_offset
// floats further.
struct KvLayerView {
  float* base = nullptr;
  int64_t block_stride = 0;
  int64_t v_offset = 0;
  int32_t block_size = 0;
  int64_t kv_dim = 0;

  float* key(const int32_t* table, int64_t p) const {
    return base + table[p / block_size] * block_stride + (p % block_size) * kv_dim;
  }
  float* value(const int32_t* table, int64_t p) const { return key(table, p) + v_offset; }
};

// Token i of a batch attends over positions [0, positions[i]] of the sequence whose block table
// is block_tables[i]; its own K/V are already in the cache.
struct AttentionInput {
  int64_t n_tokens = 0;
  const int32_t* positions = nullptr;
  const int32_t* const* block_tables = nullptr;
  KvLayerView kv;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
};

// Rotary position embedding of the first n_rot dims of every head: pair i (of n_rot / 2) turns by
// position * freq_scale * base^(-2i/n_rot) / freq_factors[i].
struct RopeParams {
  int64_t n_rot = 0;
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;  // linear position scaling (1 = none)
  // false: adjacent pairs (2i, 2i+1), GGUF/ggml "normal" (Llama); true: (i, i + n_rot/2),
  // "NeoX" (Qwen2, and Hugging Face's rotate_half).
  bool neox = false;
  const float* freq_factors = nullptr;  // n_rot / 2 divisors, or none (Llama 3.1 scaling)
};

// The compute operations the Llama graph is written over, each under a Schedule. Activations
// are f32, row-major [tokens][features]. The CPU backend is the reference and always built.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;

  // y[m][w.rows] = x[m][w.cols] * w^T.
  virtual void MatMul(const float* x, int64_t m, const WeightMatrix& w, float* y, Schedules s) = 0;
  // y = x / sqrt(mean(x^2) + eps) * weight, per row of n.
  virtual void RmsNorm(const float* x, const float* weight, int64_t m, int64_t n, float eps,
                       float* y, Schedules s) = 0;
  // Rotates every head of every row in place (RopeParams).
  virtual void Rope(float* x, int64_t m, int64_t n_heads, int64_t head_dim, const RopeParams& rope,
                    const int32_t* positions, Schedules s) = 0;
  // Causal grouped-query attention: out[i] = softmax(q[i] K^T / sqrt(d)) V over the token's KV
  // prefix, per head.
  virtual void Attention(const float* q, const AttentionInput& in, float* out, Schedules s) = 0;
  // out = silu(gate) * up, elementwise over n values.
  // Elementwise over n values (rows of any width), so the schedule is one for all.
  virtual void SwiGlu(const float* gate, const float* up, int64_t n, float* out, Schedule s) = 0;
  // out[i] = table row tokens[i], as f32.
  virtual void Embed(const WeightMatrix& table, const int32_t* tokens, int64_t m, float* out,
                     Schedules s) = 0;
};

}  // namespace llm42

#endif  // LLM42_BACKEND_BACKEND_H_
