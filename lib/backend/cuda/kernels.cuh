#ifndef LLM42_BACKEND_CUDA_KERNELS_CUH_
#define LLM42_BACKEND_CUDA_KERNELS_CUH_

// Launchers of the CUDA backend's own kernels (everything but the GEMMs: cuBLASLt's, and the
// fixed schedule's own in fixed_gemm.cuh).
// Plain declarations, so host C++ can call them; each returns the launch's error. Activations
// are f32; weights and the KV storage hold 16-bit floats (Half::kBf16 or Half::kF16).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace llm42::cuda {

enum class Half { kBf16, kF16 };

// One layer of the paged KV storage ([block][layer][k|v][block_size][width] bf16): position p of
// a row with block table T has its keys at base + T[p / block_size] * block_stride +
// (p % block_size) * kv_dim, its values block_size * kv_dim further; a batch's block tables
// flattened to [rows][max_blocks].
struct KvArgs {
  void* base = nullptr;  // the layer's keys in block 0
  int64_t block_stride = 0;
  int32_t block_size = 0;
  int64_t kv_dim = 0;
  const int32_t* tables = nullptr;
  int64_t max_blocks = 0;
};

struct RopeArgs {
  int64_t n_rot = 0;
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
  bool neox = false;
  const float* freq_factors = nullptr;  // device, or none
  float attn_factor = 1.0f;             // cosines and sines multiplied by it
};

// lib/numerics/argmax.h's ArgmaxSummary, field for field (cuda_backend.cc checks the layout).
struct ArgmaxOut {
  int32_t id;
  float best;
  float second;
};

// out[r] = the ArgmaxSummary of row rows[r] of x (rows of n), by lib/numerics/argmax.h's rule.
cudaError_t LaunchArgmaxRows(const float* x, int64_t n, const int32_t* rows, int64_t n_rows, ArgmaxOut* out,
                             cudaStream_t stream);
// out[i][:] = table row tokens[i] as f32.
cudaError_t LaunchEmbed(const void* table, Half type, int64_t cols, const int32_t* tokens, int64_t m,
                        float* out, cudaStream_t stream);
// Per row of n: y = x / sqrt(mean(x^2) + eps) * w (a fixed-order reduction).
cudaError_t LaunchRmsNorm(const float* x, const float* w, int64_t m, int64_t n, float eps, float* y,
                          cudaStream_t stream);
// Per row of n: x += add, then y = LaunchRmsNorm's of x, in one kernel with the bits of the two.
cudaError_t LaunchAddRmsNorm(float* x, const float* add, const float* w, int64_t m, int64_t n, float eps, float* y,
                             cudaStream_t stream);
cudaError_t LaunchAddBias(float* y, int64_t m, int64_t n, const float* bias, cudaStream_t stream);
cudaError_t LaunchAdd(float* y, const float* x, size_t n, cudaStream_t stream);
cudaError_t LaunchRope(float* x, int64_t m, int64_t n_heads, int64_t head_dim, const RopeArgs& rope,
                       const int32_t* positions, cudaStream_t stream);
cudaError_t LaunchSwiGlu(const float* gate, const float* up, size_t n, float* out, cudaStream_t stream);
cudaError_t LaunchGeluGlu(const float* gate, const float* up, size_t n, float* out, cudaStream_t stream);
cudaError_t LaunchScale(float* x, size_t n, float s, cudaStream_t stream);
cudaError_t LaunchSoftCap(float* x, size_t n, float cap, cudaStream_t stream);
// out[r][j] = x[r * stride + j] for m rows of n columns.
cudaError_t LaunchColumns(const float* x, int64_t m, int64_t stride, int64_t n, float* out, cudaStream_t stream);
// out[r] = x[rows[r]] (rows of n_cols); Scatter: y[rows[r]] = src[r].
cudaError_t LaunchGatherRows(const float* x, int64_t n_cols, const int32_t* rows, int64_t n_rows, float* out,
                             cudaStream_t stream);
cudaError_t LaunchScatterRows(const float* src, int64_t n_cols, const int32_t* rows, int64_t n_rows, float* y,
                              cudaStream_t stream);
// The column ranges of a matrix whose parts go to separate outputs: part i is columns
// [first[i], first[i + 1]) into y[i] (rows of first[i + 1] - first[i]).
inline constexpr int kMaxColumnParts = 4;
struct ColumnParts {
  float* y[kMaxColumnParts] = {};
  int64_t first[kMaxColumnParts + 1] = {};
  int count = 0;
};
// Each row of src (m rows of `parts.first[parts.count]` columns) into its parts' outputs.
cudaError_t LaunchSplitColumns(const float* src, int64_t m, const ColumnParts& parts, cudaStream_t stream);
// out = x rounded to the 16-bit type (activations for a GEMM).
cudaError_t LaunchToHalf(const float* x, size_t n, Half type, void* out, cudaStream_t stream);
// Row i's keys and values (f32 [rows][kv_dim]) into layer `layer` at positions[i].
cudaError_t LaunchStoreKv(const KvArgs& kv, const float* k, const float* v,
                          const int32_t* positions, int64_t m, cudaStream_t stream);
// Rope of each row's query (n_head heads) and key (n_head_kv), then the row's key and value
// stored as LaunchStoreKv does: one kernel, the bits of LaunchRope twice and LaunchStoreKv.
cudaError_t LaunchRopeStoreKv(const KvArgs& kv, float* q, float* k, const float* v, int64_t n_head,
                              int64_t n_head_kv, int64_t head_dim, const RopeArgs& rope, const int32_t* positions,
                              int64_t m, cudaStream_t stream);
// Causal grouped-query attention over each row's context [first, positions[i]] (first: 0, or
// where the sliding window begins): one thread block per (row, head, span); its warps take the
// span's positions round-robin, each keeps an online softmax, and the warps combine in a fixed
// order. A row of one span writes its output there. A row of several (a fixed row past
// kFixedAttentionSpan positions, or flash-decoding; lib/backend/attention_splits.h) writes each
// span's partial state, and a second kernel merges them in span order. A fixed row's spans
// depend only on its own context, so its result depends only on its own query and context.
// How a layer scores (AttentionShape's score_scale, softcap, window).
struct AttentionArgs {
  float scale = 1.0f;
  float softcap = 0.0f;
  int64_t window = 0;
};
// The plan of a batch (lib/backend/attention_splits.h), in device memory: per row (span
// length, span count) in `rows` (nullptr: every row one span; a count of 0: the row is a
// tile's); the wave launched — rows [first_row, first_row + wave_rows) (wave_rows -1: to the
// batch's end) — and the most spans of its rows; the partial states' room (wave_rows * n_head *
// max_spans * (head_dim + 2) floats; unused when max_spans is 1); and the query tiles as (first
// row, rows), run with the wave that carries them. A tile's rows are consecutive positions of
// one sequence; one block per (head, tile) reads each key and value once for all of them.
struct AttentionSpans {
  const int32_t* rows = nullptr;
  int64_t first_row = 0, wave_rows = -1;
  int32_t max_spans = 1;
  float* partial = nullptr;
  const int32_t* tiles = nullptr;
  int32_t n_tiles = 0;
};
cudaError_t LaunchAttention(const KvArgs& kv, const float* q, const int32_t* positions, int64_t m,
                            int64_t n_head, int64_t n_head_kv, int64_t head_dim, const AttentionArgs& args,
                            const AttentionSpans& spans, float* out, cudaStream_t stream);

}  // namespace llm42::cuda

#endif  // LLM42_BACKEND_CUDA_KERNELS_CUH_
