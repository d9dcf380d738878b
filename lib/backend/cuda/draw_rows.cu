#include "lib/backend/cuda/draw_rows.cuh"

namespace llm42::cuda {
namespace {

// 512 threads: a 128k vocabulary is 250 tokens a thread a pass; the histograms' atomics spread
// over 256 bins.
constexpr int kDrawThreads = 512;

// draw_rule.h's Group over a block: __syncthreads and shared-memory atomics.
class BlockGroup {
 public:
  __device__ BlockGroup(uint64_t* bins, uint64_t* words) : bins_(bins), words_(words) {}
  __device__ int rank() const { return static_cast<int>(threadIdx.x); }
  __device__ int size() const { return static_cast<int>(blockDim.x); }
  __device__ void Sync() { __syncthreads(); }
  __device__ uint64_t* Bins() { return bins_; }
  __device__ uint64_t* Shared() { return words_; }
  __device__ void Add(uint64_t* p, uint64_t v) {
    if (v != 0) atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
  }
  __device__ void Min(uint64_t* p, uint64_t v) {
    atomicMin(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
  }
  __device__ void Max(uint64_t* p, uint64_t v) {
    atomicMax(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
  }

 private:
  uint64_t* bins_;
  uint64_t* words_;
};

__global__ void DrawRowsKernel(const float* x, int64_t n_cols, const RowDraw* draws, DrawnRow* out) {
  __shared__ uint64_t bins[256];
  __shared__ uint64_t words[4];
  BlockGroup g(bins, words);
  const RowDraw d = draws[blockIdx.x];
  DrawRow(g, x + static_cast<int64_t>(d.row) * n_cols, n_cols, d.params, d.position, d.top_n, &out[blockIdx.x]);
}

}  // namespace

cudaError_t LaunchDrawRows(const float* x, int64_t n_cols, const RowDraw* draws, int64_t n_draws, DrawnRow* out,
                           cudaStream_t stream) {
  if (n_draws == 0) return cudaSuccess;
  DrawRowsKernel<<<static_cast<unsigned>(n_draws), kDrawThreads, 0, stream>>>(x, n_cols, draws, out);
  return cudaGetLastError();
}

}  // namespace llm42::cuda
