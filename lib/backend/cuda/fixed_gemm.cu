#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include "lib/backend/cuda/fixed_gemm.cuh"

namespace llm42::cuda {
namespace {

__device__ inline float ToFloat(__half v) { return __half2float(v); }
__device__ inline float ToFloat(__nv_bfloat16 v) { return __bfloat162float(v); }

// ---- FMA chains (CUDA cores) ----------------------------------------------------------------
// 64x64 outputs per block of 256 threads, 4x4 per thread, k in steps of 16 through shared
// memory; out-of-range elements load as 0, which leaves every chain's value unchanged.
constexpr int kFmaTile = 64, kFmaDepth = 16, kFmaThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kFmaThreads)
    FmaChainGemmKernel(const T* x, const T* w, float* y, int64_t m, int64_t n, int64_t k) {
  __shared__ float xs[kFmaDepth][kFmaTile + 1], ws[kFmaDepth][kFmaTile + 1];
  const int tx = static_cast<int>(threadIdx.x) % 16, ty = static_cast<int>(threadIdx.x) / 16;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kFmaTile, col0 = static_cast<int64_t>(blockIdx.x) * kFmaTile;
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < k; k0 += kFmaDepth) {
    for (int i = static_cast<int>(threadIdx.x); i < kFmaTile * kFmaDepth; i += kFmaThreads) {
      const int r = i / kFmaDepth, c = i % kFmaDepth;
      const int64_t kk = k0 + c;
      xs[c][r] = row0 + r < m && kk < k ? ToFloat(x[(row0 + r) * k + kk]) : 0.0f;
      ws[c][r] = col0 + r < n && kk < k ? ToFloat(w[(col0 + r) * k + kk]) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int c = 0; c < kFmaDepth; ++c) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        a[i] = xs[c][ty * 4 + i];
        b[i] = ws[c][tx * 4 + i];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
      }
    }
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) {
      const int64_t r = row0 + ty * 4 + i, c = col0 + tx * 4 + j;
      if (r < m && c < n) y[r * n + c] = acc[i][j];
    }
  }
}

// ---- Tensor cores (WMMA) --------------------------------------------------------------------
// Each block stages kTcDepth columns of k of its x rows and w rows in shared memory (zeros
// outside the matrices), then every warp runs its fragments' mma over the stage's 16-wide k
// steps in order. Shared rows are padded by 8 elements: the leading dimension stays a multiple
// of 8 (WMMA's rule for 16-bit types) and every 16-row fragment starts 32-byte aligned.
constexpr int kTcDepth = 32, kTcLd = kTcDepth + 8;

// Copies rows [row0, row0 + kRows) x columns [k0, k0 + kTcDepth) of `a` (rows x k) into
// `tile` (kRows x kTcLd). `vec`: k is a multiple of 8 and `a` 16-byte aligned, so 8 elements
// move as one 16-byte load.
template <typename T, int kRows, int kThreads>
__device__ inline void StageTile(const T* a, int64_t rows, int64_t k, int64_t row0, int64_t k0, bool vec, T* tile) {
  if (vec) {
    constexpr int kChunks = kRows * kTcDepth / 8;
    for (int c = static_cast<int>(threadIdx.x); c < kChunks; c += kThreads) {
      const int r = c / (kTcDepth / 8), q = c % (kTcDepth / 8);
      const int64_t gk = k0 + q * 8;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (row0 + r < rows && gk < k) v = *reinterpret_cast<const uint4*>(a + (row0 + r) * k + gk);
      *reinterpret_cast<uint4*>(tile + r * kTcLd + q * 8) = v;
    }
  } else {
    const T zero = T(0.0f);
    for (int e = static_cast<int>(threadIdx.x); e < kRows * kTcDepth; e += kThreads) {
      const int r = e / kTcDepth, c = e % kTcDepth;
      const int64_t gk = k0 + c;
      tile[r * kTcLd + c] = row0 + r < rows && gk < k ? a[(row0 + r) * k + gk] : zero;
    }
  }
}

// A block computes kBm x kBn outputs; each of its warps kWm x kWn (in 16 x 16 fragments).
template <typename T, int kBm, int kBn, int kWm, int kWn>
__global__ void __launch_bounds__((kBm / kWm) * (kBn / kWn) * 32)
    TensorCoreGemmKernel(const T* x, const T* w, float* y, int64_t m, int64_t n, int64_t k, bool vec) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  namespace wmma = nvcuda::wmma;
  constexpr int kWarpsN = kBn / kWn, kWarps = (kBm / kWm) * kWarpsN, kThreads = kWarps * 32;
  constexpr int kFm = kWm / 16, kFn = kWn / 16;
  __shared__ __align__(128) T xs[kBm * kTcLd];
  __shared__ __align__(128) T ws[kBn * kTcLd];
  __shared__ __align__(128) float staged[kWarps][16 * 16];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int wm = warp / kWarpsN, wn = warp % kWarpsN;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kBm, col0 = static_cast<int64_t>(blockIdx.x) * kBn;

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kFm][kFn];
#pragma unroll
  for (int i = 0; i < kFm; ++i) {
#pragma unroll
    for (int j = 0; j < kFn; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
  }
  for (int64_t k0 = 0; k0 < k; k0 += kTcDepth) {
    StageTile<T, kBm, kThreads>(x, m, k, row0, k0, vec, xs);
    StageTile<T, kBn, kThreads>(w, n, k, col0, k0, vec, ws);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTcDepth; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a[kFm];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> b[kFn];
#pragma unroll
      for (int i = 0; i < kFm; ++i) wmma::load_matrix_sync(a[i], xs + (wm * kWm + i * 16) * kTcLd + kk, kTcLd);
#pragma unroll
      for (int j = 0; j < kFn; ++j) wmma::load_matrix_sync(b[j], ws + (wn * kWn + j * 16) * kTcLd + kk, kTcLd);
#pragma unroll
      for (int i = 0; i < kFm; ++i) {
#pragma unroll
        for (int j = 0; j < kFn; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
      }
    }
    __syncthreads();
  }
  // Through the warp's staging square, so that edge tiles write only what lies inside y.
  float* stage = staged[warp];
#pragma unroll
  for (int i = 0; i < kFm; ++i) {
#pragma unroll
    for (int j = 0; j < kFn; ++j) {
      wmma::store_matrix_sync(stage, acc[i][j], 16, wmma::mem_row_major);
      __syncwarp();
      for (int e = lane; e < 16 * 16; e += 32) {
        const int64_t r = row0 + wm * kWm + i * 16 + e / 16, c = col0 + wn * kWn + j * 16 + e % 16;
        if (r < m && c < n) y[r * n + c] = stage[e];
      }
      __syncwarp();
    }
  }
#endif
}

template <typename T, int kBm, int kBn, int kWm, int kWn>
cudaError_t LaunchTensorCore(const T* x, const T* w, float* y, int64_t m, int64_t n, int64_t k, cudaStream_t stream) {
  constexpr int kThreads = (kBm / kWm) * (kBn / kWn) * 32;
  const bool vec = k % 8 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0;
  const dim3 grid(static_cast<unsigned>((n + kBn - 1) / kBn), static_cast<unsigned>((m + kBm - 1) / kBm));
  TensorCoreGemmKernel<T, kBm, kBn, kWm, kWn><<<grid, kThreads, 0, stream>>>(x, w, y, m, n, k, vec);
  return cudaGetLastError();
}

template <typename T>
cudaError_t Launch(FixedGemmKind kind, const void* xv, const void* wv, float* y, int64_t m, int64_t n, int64_t k,
                   cudaStream_t stream) {
  const T* x = static_cast<const T*>(xv);
  const T* w = static_cast<const T*>(wv);
  if (kind == FixedGemmKind::kFmaChain) {
    const dim3 grid(static_cast<unsigned>((n + kFmaTile - 1) / kFmaTile),
                    static_cast<unsigned>((m + kFmaTile - 1) / kFmaTile));
    FmaChainGemmKernel<T><<<grid, kFmaThreads, 0, stream>>>(x, w, y, m, n, k);
    return cudaGetLastError();
  }
  // Decode and small verify groups: one 16-row fragment high, narrow in n so that even a
  // 4096-wide weight spreads over 128 blocks. Larger batches: 64 x 64 blocks, 32 x 32 per warp.
  if (m <= 16) return LaunchTensorCore<T, 16, 32, 16, 16>(x, w, y, m, n, k, stream);
  return LaunchTensorCore<T, 64, 64, 32, 32>(x, w, y, m, n, k, stream);
}

}  // namespace

cudaError_t LaunchFixedGemm(FixedGemmKind kind, const void* x, const void* w, Half type, float* y, int64_t m,
                            int64_t n, int64_t k, cudaStream_t stream) {
  if (m == 0 || n == 0) return cudaSuccess;
  return type == Half::kF16 ? Launch<__half>(kind, x, w, y, m, n, k, stream)
                            : Launch<__nv_bfloat16>(kind, x, w, y, m, n, k, stream);
}

}  // namespace llm42::cuda
