#include "lib/backend/cuda/control_rows.cuh"

namespace llm42::cuda {
namespace {

constexpr int kControlThreads = 256;

// A block a row. The edits touch allowed tokens and the mask refused ones, one thread each (a
// row's edits name each token once): no two threads write one logit.
__global__ void ControlRowsKernel(float* x, int64_t n_cols, const DeviceRowControl* controls, const LogitEdit* edits,
                                  const uint64_t* words) {
  const DeviceRowControl c = controls[blockIdx.x];
  float* row = x + static_cast<int64_t>(c.row) * n_cols;
  const uint64_t* allowed = c.first_word >= 0 ? words + c.first_word : nullptr;
  for (int64_t i = threadIdx.x; i < c.n_edits; i += blockDim.x) {
    const LogitEdit e = edits[c.first_edit + i];
    if (allowed == nullptr || TokenAllowed(allowed, e.token)) row[e.token] = EditedLogit(row[e.token], e, c.rule);
  }
  if (allowed == nullptr) return;
  for (int64_t t = threadIdx.x; t < n_cols; t += blockDim.x) {
    if (!TokenAllowed(allowed, t)) row[t] = NoLogit();
  }
}

}  // namespace

cudaError_t LaunchControlRows(float* x, int64_t n_cols, const DeviceRowControl* controls, int64_t n_controls,
                              const LogitEdit* edits, const uint64_t* words, cudaStream_t stream) {
  if (n_controls == 0) return cudaSuccess;
  ControlRowsKernel<<<static_cast<unsigned>(n_controls), kControlThreads, 0, stream>>>(x, n_cols, controls, edits,
                                                                                        words);
  return cudaGetLastError();
}

}  // namespace llm42::cuda
