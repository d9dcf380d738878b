#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "lib/backend/cuda/kernels.cuh"

namespace llm42::cuda {
namespace {

constexpr int kThreads = 256;

unsigned Blocks(size_t n, int threads = kThreads) {
  return static_cast<unsigned>((n + static_cast<size_t>(threads) - 1) / static_cast<size_t>(threads));
}

__device__ inline float Load(const void* p, Half type, size_t i) {
  return type == Half::kF16 ? __half2float(static_cast<const __half*>(p)[i])
                            : __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
}

__global__ void EmbedKernel(const void* table, Half type, int64_t cols, const int32_t* tokens, float* out) {
  const int64_t row = blockIdx.y;
  const int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (j >= cols) return;
  out[row * cols + j] = Load(table, type, static_cast<size_t>(tokens[row]) * static_cast<size_t>(cols) + j);
}

// One block per row; each thread sums a strided slice, then a fixed tree over the threads.
// y's row = x's row (n values) / sqrt(mean of squares + eps) * w, by one block: the squares
// summed per thread with explicit FMAs, then in a fixed tree, so that RmsNormKernel and
// AddRmsNormKernel give the same bits.
__device__ inline void RmsNormRow(const float* xr, const float* w, int64_t n, float eps, float* yr) {
  __shared__ float partial[kThreads];
  float s = 0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s = __fmaf_rn(xr[j], xr[j], s);
  partial[threadIdx.x] = s;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  const float scale = 1.0f / sqrtf(partial[0] / static_cast<float>(n) + eps);
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) yr[j] = xr[j] * scale * w[j];
}

__global__ void RmsNormKernel(const float* x, const float* w, int64_t n, float eps, float* y) {
  RmsNormRow(x + blockIdx.x * n, w, n, eps, y + blockIdx.x * n);
}

// One block per row: x += add (as AddKernel), then RmsNormRow of the sum.
__global__ void AddRmsNormKernel(float* x, const float* add, const float* w, int64_t n, float eps, float* y) {
  float* xr = x + blockIdx.x * n;
  const float* ar = add + blockIdx.x * n;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) xr[j] += ar[j];
  __syncthreads();  // the row's sums, written by other threads of the block
  RmsNormRow(xr, w, n, eps, y + blockIdx.x * n);
}

// One block per row, lib/numerics/argmax.h's rule to the bit: the best is the greatest value
// that is not NaN, the lowest id on ties (a NaN at id 0 stays the best, as a scan from id 0 that
// replaces only on greater leaves it); `second` the largest non-NaN value at another id. Both
// reductions are exact (maxima), so their tree order changes nothing but the sign of a zero
// `second` among equal zeros.
__global__ void ArgmaxRowsKernel(const float* x, int64_t n, const int32_t* rows, ArgmaxOut* out) {
  __shared__ float value[kThreads];
  __shared__ int64_t index[kThreads];
  const float* xr = x + static_cast<int64_t>(rows[blockIdx.x]) * n;
  float bv = -INFINITY;
  int64_t bi = INT64_MAX;  // none yet
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const float v = xr[j];
    if (!isnan(v) && (v > bv || (v == bv && j < bi))) {
      bv = v;
      bi = j;
    }
  }
  value[threadIdx.x] = bv;
  index[threadIdx.x] = bi;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      const float v = value[threadIdx.x + stride];
      const int64_t i = index[threadIdx.x + stride];
      if (v > value[threadIdx.x] || (v == value[threadIdx.x] && i < index[threadIdx.x])) {
        value[threadIdx.x] = v;
        index[threadIdx.x] = i;
      }
    }
    __syncthreads();
  }
  const int64_t best = isnan(xr[0]) || index[0] == INT64_MAX ? 0 : index[0];
  __syncthreads();
  float s = -INFINITY;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    if (j != best && !isnan(xr[j])) s = fmaxf(s, xr[j]);
  }
  value[threadIdx.x] = s;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) value[threadIdx.x] = fmaxf(value[threadIdx.x], value[threadIdx.x + stride]);
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = ArgmaxOut{static_cast<int32_t>(best), xr[best], value[0]};
}

__global__ void AddBiasKernel(float* y, int64_t m, int64_t n, const float* bias) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < m * n) y[i] += bias[i % n];
}

__global__ void AddKernel(float* y, const float* x, size_t n) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] += x[i];
}

// Pair t (of n_heads * n_rot / 2) of row `row` of x, rotated in place. The angle follows the
// CPU backend's recurrence theta_p = position * freq_scale * theta_scale^p, in float, and the
// rotation in double sin/cos, its products and sums rounded one by one (never contracted), so
// that RopeKernel and RopeStoreKvKernel give the same bits.
__device__ inline void RotatePair(float* x, int64_t row, int64_t t, int64_t n_heads, int64_t head_dim,
                                  const RopeArgs& rope, const int32_t* positions) {
  const int64_t half = rope.n_rot / 2;
  const int64_t p = t % half, head = t / half;
  const float theta_scale = static_cast<float>(pow(static_cast<double>(rope.freq_base), -2.0 / static_cast<double>(rope.n_rot)));
  float theta = static_cast<float>(positions[row]) * rope.freq_scale;
  for (int64_t i = 0; i < p; ++i) theta *= theta_scale;
  if (rope.freq_factors != nullptr) theta /= rope.freq_factors[p];
  double s, c;
  sincos(static_cast<double>(theta), &s, &c);
  float cf = static_cast<float>(c), sf = static_cast<float>(s);
  if (rope.attn_factor != 1.0f) {
    cf *= rope.attn_factor;
    sf *= rope.attn_factor;
  }
  float* v = x + (row * n_heads + head) * head_dim;
  const int64_t stride = rope.neox ? half : 1;
  float* a = v + p * (rope.neox ? 1 : 2);
  const float x0 = a[0], x1 = a[stride];
  a[0] = __fsub_rn(__fmul_rn(x0, cf), __fmul_rn(x1, sf));
  a[stride] = __fadd_rn(__fmul_rn(x0, sf), __fmul_rn(x1, cf));
}

// One thread per (row, head, pair).
__global__ void RopeKernel(float* x, int64_t m, int64_t n_heads, int64_t head_dim, RopeArgs rope,
                           const int32_t* positions) {
  const int64_t pairs = n_heads * (rope.n_rot / 2);
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (t >= m * pairs) return;
  RotatePair(x, t / pairs, t % pairs, n_heads, head_dim, rope, positions);
}

// GELU's tanh form and soft-capping in double, as the CPU's PortableGeluTanh / PortableSoftCap
// (CUDA's tanh, not theirs: within an ulp of them, and one arithmetic per element on the device).
__global__ void GeluGluKernel(const float* gate, const float* up, size_t n, float* out) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const double g = gate[i];
  const float gelu = static_cast<float>(0.5 * g * (1.0 + tanh(0.79788456080286535588 * (g + 0.044715 * g * g * g))));
  out[i] = gelu * up[i];
}

__global__ void ScaleKernel(float* x, size_t n, float s) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] *= s;
}

__device__ float SoftCapOf(float x, float cap) {
  return static_cast<float>(static_cast<double>(cap) * tanh(static_cast<double>(x) / static_cast<double>(cap)));
}

__global__ void SoftCapKernel(float* x, size_t n, float cap) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] = SoftCapOf(x[i], cap);
}

__global__ void SwiGluKernel(const float* gate, const float* up, size_t n, float* out) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float g = gate[i];
  out[i] = g / (1.0f + expf(-g)) * up[i];
}

__global__ void GatherKernel(const float* x, int64_t n_cols, const int32_t* rows, float* out) {
  const int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (j < n_cols) out[blockIdx.y * n_cols + j] = x[rows[blockIdx.y] * n_cols + j];
}

__global__ void ColumnsKernel(const float* x, int64_t stride, int64_t n, float* out) {
  const int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (j < n) out[blockIdx.y * n + j] = x[blockIdx.y * stride + j];
}

__global__ void ScatterKernel(const float* src, int64_t n_cols, const int32_t* rows, float* y) {
  const int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (j < n_cols) y[rows[blockIdx.y] * n_cols + j] = src[blockIdx.y * n_cols + j];
}

__global__ void SplitColumnsKernel(const float* src, ColumnParts parts) {
  const int64_t n = parts.first[parts.count];
  const int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (j >= n) return;
  int part = 0;
  while (j >= parts.first[part + 1]) ++part;
  const int64_t width = parts.first[part + 1] - parts.first[part];
  parts.y[part][blockIdx.y * width + (j - parts.first[part])] = src[blockIdx.y * n + j];
}

__global__ void ToHalfKernel(const float* x, size_t n, Half type, void* out) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  if (type == Half::kF16) {
    static_cast<__half*>(out)[i] = __float2half_rn(x[i]);
  } else {
    static_cast<__nv_bfloat16*>(out)[i] = __float2bfloat16_rn(x[i]);
  }
}

__device__ inline __nv_bfloat16* KvKey(const KvArgs& kv, const int32_t* table, int64_t p) {
  return static_cast<__nv_bfloat16*>(kv.base) + table[p / kv.block_size] * kv.block_stride +
         (p % kv.block_size) * kv.kv_dim;
}

__global__ void StoreKvKernel(KvArgs kv, const float* k, const float* v, const int32_t* positions) {
  const int64_t row = blockIdx.y;
  const int64_t d = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (d >= kv.kv_dim) return;
  __nv_bfloat16* key = KvKey(kv, kv.tables + row * kv.max_blocks, positions[row]);
  key[d] = __float2bfloat16_rn(k[row * kv.kv_dim + d]);
  key[static_cast<int64_t>(kv.block_size) * kv.kv_dim + d] = __float2bfloat16_rn(v[row * kv.kv_dim + d]);
}

// One block per row: its query's and key's pairs rotated (as RopeKernel), then its key and
// value stored (as StoreKvKernel).
__global__ void RopeStoreKvKernel(KvArgs kv, float* q, float* k, const float* v, int64_t n_head,
                                  int64_t n_head_kv, int64_t head_dim, RopeArgs rope, const int32_t* positions) {
  const int64_t row = blockIdx.x, half = rope.n_rot / 2;
  for (int64_t t = threadIdx.x; t < n_head * half; t += blockDim.x) {
    RotatePair(q, row, t, n_head, head_dim, rope, positions);
  }
  for (int64_t t = threadIdx.x; t < n_head_kv * half; t += blockDim.x) {
    RotatePair(k, row, t, n_head_kv, head_dim, rope, positions);
  }
  __syncthreads();  // the row's rotated key, written by other threads of the block
  __nv_bfloat16* key = KvKey(kv, kv.tables + row * kv.max_blocks, positions[row]);
  for (int64_t d = threadIdx.x; d < kv.kv_dim; d += blockDim.x) {
    key[d] = __float2bfloat16_rn(k[row * kv.kv_dim + d]);
    key[static_cast<int64_t>(kv.block_size) * kv.kv_dim + d] = __float2bfloat16_rn(v[row * kv.kv_dim + d]);
  }
}

constexpr int kWarps = 4;
constexpr int kMaxDimsPerLane = 8;  // head_dim up to 256

// A head's output from its merged state: lane's dimensions lane, lane + 32, ... of o / sum.
__device__ inline void WriteHead(const float (&o)[kMaxDimsPerLane], float sum, int lane, int dims, int64_t head_dim,
                                 float* oh) {
#pragma unroll
  for (int i = 0; i < kMaxDimsPerLane; ++i) {
    if (i >= dims) break;
    const int64_t d = lane + 32 * i;
    if (d < head_dim) oh[d] = o[i] / sum;
  }
}

__global__ void AttentionKernel(KvArgs kv, const float* q, const int32_t* positions,
                                int64_t n_head, int64_t n_head_kv, int64_t head_dim, AttentionArgs args,
                                AttentionSpans spans, float* out) {
  const int64_t head = blockIdx.x, row = spans.first_row + blockIdx.y, span = blockIdx.z;
  const int32_t span_len = spans.rows != nullptr ? spans.rows[2 * row] : 0;
  const int32_t n_spans = spans.rows != nullptr ? spans.rows[2 * row + 1] : 1;
  if (span >= n_spans) return;  // a shorter row than the longest
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t kv_head = head / (n_head / n_head_kv);
  const int64_t context_end = positions[row] + 1;
  const int32_t* table = kv.tables + row * kv.max_blocks;
  const float* qh = q + (row * n_head + head) * head_dim;
  const float scale = args.scale;
  const int64_t context_first = args.window > 0 && context_end > args.window ? context_end - args.window : 0;
  // One span: the whole context.
  const int64_t first = n_spans == 1 ? context_first : context_first + span * span_len;
  const int64_t len = n_spans == 1 || span == n_spans - 1 ? context_end : first + span_len;
  const int dims = static_cast<int>((head_dim + 31) / 32);
  float qr[kMaxDimsPerLane], acc[kMaxDimsPerLane];
  for (int i = 0; i < kMaxDimsPerLane; ++i) {
    const int64_t d = lane + 32 * i;
    qr[i] = i < dims && d < head_dim ? qh[d] : 0.0f;
    acc[i] = 0.0f;
  }
  float mx = -INFINITY, sum = 0.0f;
  const int64_t v_off = static_cast<int64_t>(kv.block_size) * kv.kv_dim;
  // Unrolled so that the next positions' keys and values load while this one's arithmetic runs
  // (the arithmetic, and so the bits, stays in position order).
#pragma unroll 4
  for (int64_t t = first + warp; t < len; t += kWarps) {
    const __nv_bfloat16* key = KvKey(kv, table, t) + kv_head * head_dim;
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < kMaxDimsPerLane; ++i) {
      if (i >= dims) break;
      const int64_t d = lane + 32 * i;
      if (d < head_dim) s += qr[i] * __bfloat162float(key[d]);
    }
    for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
    s *= scale;
    if (args.softcap != 0.0f) s = SoftCapOf(s, args.softcap);
    const float m_new = fmaxf(mx, s);
    const float c = expf(mx - m_new), p = expf(s - m_new);
    sum = sum * c + p;
    const __nv_bfloat16* value = key + v_off;
#pragma unroll
    for (int i = 0; i < kMaxDimsPerLane; ++i) {
      if (i >= dims) break;
      const int64_t d = lane + 32 * i;
      acc[i] = acc[i] * c + (d < head_dim ? p * __bfloat162float(value[d]) : 0.0f);
    }
    mx = m_new;
  }
  // Combine the warps in order 0, 1, 2, 3.
  __shared__ float s_max[kWarps], s_sum[kWarps];
  __shared__ float s_acc[kWarps][kMaxDimsPerLane * 32];
  if (lane == 0) {
    s_max[warp] = mx;
    s_sum[warp] = sum;
  }
#pragma unroll
  for (int i = 0; i < kMaxDimsPerLane && i < dims; ++i) s_acc[warp][lane + 32 * i] = acc[i];
  __syncthreads();
  if (warp != 0) return;
  float total_max = -INFINITY;
  for (int w = 0; w < kWarps; ++w) total_max = fmaxf(total_max, s_max[w]);
  float total_sum = 0.0f, o[kMaxDimsPerLane] = {};
  for (int w = 0; w < kWarps; ++w) {
    if (s_sum[w] == 0.0f) continue;  // a warp that had no position
    const float c = expf(s_max[w] - total_max);
    total_sum += s_sum[w] * c;
#pragma unroll
    for (int i = 0; i < kMaxDimsPerLane && i < dims; ++i) o[i] += s_acc[w][lane + 32 * i] * c;
  }
  if (n_spans > 1) {  // this span's state, for AttentionMergeKernel
    float* p = spans.partial + (((row - spans.first_row) * n_head + head) * spans.max_spans + span) * (head_dim + 2);
    if (lane == 0) {
      p[0] = total_max;
      p[1] = total_sum;
    }
#pragma unroll
    for (int i = 0; i < kMaxDimsPerLane; ++i) {
      if (i >= dims) break;
      const int64_t d = lane + 32 * i;
      if (d < head_dim) p[2 + d] = o[i];
    }
    return;
  }
  WriteHead(o, total_sum, lane, dims, head_dim, out + (row * n_head + head) * head_dim);
}

// A query tile (up to kTileRows rows, consecutive positions of one sequence) for one head: the
// keys and values from the first row's context start to the last row's position pass through
// shared memory kTileKeys at a time, each row taking those of its own context. Thread t serves
// row t / 4 and a quarter of the head's dimensions (the four of a row are neighbouring lanes);
// each row keeps an online softmax, rescaled once per chunk of keys.
constexpr int kTileRows = 32, kTileKeys = 32, kTileThreads = 4 * kTileRows;

// kMaxQuarter: a thread's dimensions at most (32: head_dim up to 128; 64: up to 256).
template <int kMaxQuarter>
__global__ void TileAttentionKernel(KvArgs kv, const float* q, const int32_t* positions,
                                    int64_t n_head, int64_t n_head_kv, int64_t head_dim, AttentionArgs args,
                                    const int32_t* tiles, float* out) {
  __shared__ __nv_bfloat16 keys[kTileKeys][kMaxDimsPerLane * 32];
  __shared__ __nv_bfloat16 values[kTileKeys][kMaxDimsPerLane * 32];
  const int64_t head = blockIdx.x;
  const int64_t first_row = tiles[2 * blockIdx.y], n_rows = tiles[2 * blockIdx.y + 1];
  const int64_t kv_head = head / (n_head / n_head_kv);
  const int t = static_cast<int>(threadIdx.x);
  const int r = t / 4, quarter = t % 4;
  const bool active = r < n_rows;
  const int64_t row = first_row + (active ? r : 0);
  const int64_t pos = positions[row];
  const int64_t first_pos = positions[first_row], last_pos = positions[first_row + n_rows - 1];
  // The last row's block table holds every block the tile reads.
  const int32_t* table = kv.tables + (first_row + n_rows - 1) * kv.max_blocks;
  auto context_first = [&](int64_t p) { return args.window > 0 && p + 1 > args.window ? p + 1 - args.window : 0; };
  const int64_t own_first = context_first(pos);
  const int64_t width = (head_dim + 3) / 4;  // this thread's dimensions: [quarter * width, ...)
  const int64_t d0 = quarter * width;
  float qr[kMaxQuarter], acc[kMaxQuarter];
  const float* qh = q + (row * n_head + head) * head_dim;
  for (int i = 0; i < kMaxQuarter; ++i) {
    qr[i] = i < width && d0 + i < head_dim ? qh[d0 + i] : 0.0f;
    acc[i] = 0.0f;
  }
  float mx = -INFINITY, sum = 0.0f;
  const int64_t v_off = static_cast<int64_t>(kv.block_size) * kv.kv_dim;
  for (int64_t chunk = context_first(first_pos); chunk <= last_pos; chunk += kTileKeys) {
    __syncthreads();  // the previous chunk's keys are read
    for (int64_t i = t; i < kTileKeys * head_dim; i += kTileThreads) {
      const int64_t j = i / head_dim, d = i % head_dim, p = chunk + j;
      __nv_bfloat16 k = __float2bfloat16(0.0f), v = k;
      if (p <= last_pos) {
        const __nv_bfloat16* key = KvKey(kv, table, p) + kv_head * head_dim;
        k = key[d];
        v = key[v_off + d];
      }
      keys[j][d] = k;
      values[j][d] = v;
    }
    __syncthreads();
    float s[kTileKeys];
    float chunk_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < kTileKeys; ++j) {
      float part = 0.0f;
      for (int i = 0; i < kMaxQuarter; ++i) {
        if (i < width && d0 + i < head_dim) part += qr[i] * __bfloat162float(keys[j][d0 + i]);
      }
      part += __shfl_xor_sync(0xffffffffu, part, 1);
      part += __shfl_xor_sync(0xffffffffu, part, 2);
      float score = part * args.scale;
      if (args.softcap != 0.0f) score = SoftCapOf(score, args.softcap);
      const int64_t p = chunk + j;
      s[j] = active && p >= own_first && p <= pos ? score : -INFINITY;
      chunk_max = fmaxf(chunk_max, s[j]);
    }
    if (chunk_max == -INFINITY) continue;  // none of this row's keys here
    const float m_new = fmaxf(mx, chunk_max);
    const float c = expf(mx - m_new);
    sum *= c;
    for (int i = 0; i < kMaxQuarter; ++i) acc[i] *= c;
#pragma unroll
    for (int j = 0; j < kTileKeys; ++j) {
      if (s[j] == -INFINITY) continue;
      const float p = expf(s[j] - m_new);
      sum += p;
      for (int i = 0; i < kMaxQuarter; ++i) {
        if (i < width && d0 + i < head_dim) acc[i] += p * __bfloat162float(values[j][d0 + i]);
      }
    }
    mx = m_new;
  }
  if (!active) return;
  float* oh = out + (row * n_head + head) * head_dim;
  for (int i = 0; i < kMaxQuarter; ++i) {
    if (i < width && d0 + i < head_dim) oh[d0 + i] = acc[i] / sum;
  }
}

// A row's spans merged in span order (one warp per (head, row) of several spans), as the
// warps of one span are.
__global__ void AttentionMergeKernel(AttentionSpans spans, int64_t n_head, int64_t head_dim, float* out) {
  const int64_t head = blockIdx.x, row = spans.first_row + blockIdx.y;
  const int32_t n_spans = spans.rows[2 * row + 1];
  if (n_spans <= 1) return;  // written by AttentionKernel, or a tile's
  const int lane = static_cast<int>(threadIdx.x);
  const int dims = static_cast<int>((head_dim + 31) / 32);
  const float* p = spans.partial + ((row - spans.first_row) * n_head + head) * spans.max_spans * (head_dim + 2);
  float total_max = -INFINITY;
  for (int32_t s = 0; s < n_spans; ++s) total_max = fmaxf(total_max, p[s * (head_dim + 2)]);
  float total_sum = 0.0f, o[kMaxDimsPerLane] = {};
  for (int32_t s = 0; s < n_spans; ++s) {
    const float* ps = p + s * (head_dim + 2);
    if (ps[1] == 0.0f) continue;
    const float c = expf(ps[0] - total_max);
    total_sum += ps[1] * c;
#pragma unroll
    for (int i = 0; i < kMaxDimsPerLane; ++i) {
      if (i >= dims) break;
      const int64_t d = lane + 32 * i;
      if (d < head_dim) o[i] += ps[2 + d] * c;
    }
  }
  WriteHead(o, total_sum, lane, dims, head_dim, out + (row * n_head + head) * head_dim);
}

}  // namespace

cudaError_t LaunchEmbed(const void* table, Half type, int64_t cols, const int32_t* tokens, int64_t m, float* out,
                        cudaStream_t stream) {
  if (m == 0) return cudaSuccess;
  EmbedKernel<<<dim3(Blocks(static_cast<size_t>(cols)), static_cast<unsigned>(m)), kThreads, 0, stream>>>(
      table, type, cols, tokens, out);
  return cudaGetLastError();
}

cudaError_t LaunchRmsNorm(const float* x, const float* w, int64_t m, int64_t n, float eps, float* y,
                          cudaStream_t stream) {
  if (m == 0) return cudaSuccess;
  RmsNormKernel<<<static_cast<unsigned>(m), kThreads, 0, stream>>>(x, w, n, eps, y);
  return cudaGetLastError();
}

cudaError_t LaunchAddRmsNorm(float* x, const float* add, const float* w, int64_t m, int64_t n, float eps, float* y,
                             cudaStream_t stream) {
  if (m == 0) return cudaSuccess;
  AddRmsNormKernel<<<static_cast<unsigned>(m), kThreads, 0, stream>>>(x, add, w, n, eps, y);
  return cudaGetLastError();
}

cudaError_t LaunchAddBias(float* y, int64_t m, int64_t n, const float* bias, cudaStream_t stream) {
  if (m * n == 0) return cudaSuccess;
  AddBiasKernel<<<Blocks(static_cast<size_t>(m * n)), kThreads, 0, stream>>>(y, m, n, bias);
  return cudaGetLastError();
}

cudaError_t LaunchAdd(float* y, const float* x, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  AddKernel<<<Blocks(n), kThreads, 0, stream>>>(y, x, n);
  return cudaGetLastError();
}

cudaError_t LaunchRope(float* x, int64_t m, int64_t n_heads, int64_t head_dim, const RopeArgs& rope,
                       const int32_t* positions, cudaStream_t stream) {
  const size_t n = static_cast<size_t>(m * n_heads * (rope.n_rot / 2));
  if (n == 0) return cudaSuccess;
  RopeKernel<<<Blocks(n), kThreads, 0, stream>>>(x, m, n_heads, head_dim, rope, positions);
  return cudaGetLastError();
}

cudaError_t LaunchRopeStoreKv(const KvArgs& kv, float* q, float* k, const float* v, int64_t n_head,
                              int64_t n_head_kv, int64_t head_dim, const RopeArgs& rope, const int32_t* positions,
                              int64_t m, cudaStream_t stream) {
  if (m == 0) return cudaSuccess;
  if (rope.n_rot < 0 || rope.n_rot > head_dim || n_head_kv * head_dim != kv.kv_dim) return cudaErrorInvalidValue;
  RopeStoreKvKernel<<<static_cast<unsigned>(m), kThreads, 0, stream>>>(kv, q, k, v, n_head, n_head_kv, head_dim,
                                                                       rope, positions);
  return cudaGetLastError();
}

cudaError_t LaunchSwiGlu(const float* gate, const float* up, size_t n, float* out, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  SwiGluKernel<<<Blocks(n), kThreads, 0, stream>>>(gate, up, n, out);
  return cudaGetLastError();
}

cudaError_t LaunchGeluGlu(const float* gate, const float* up, size_t n, float* out, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  GeluGluKernel<<<Blocks(n), kThreads, 0, stream>>>(gate, up, n, out);
  return cudaGetLastError();
}

cudaError_t LaunchScale(float* x, size_t n, float s, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  ScaleKernel<<<Blocks(n), kThreads, 0, stream>>>(x, n, s);
  return cudaGetLastError();
}

cudaError_t LaunchSoftCap(float* x, size_t n, float cap, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  SoftCapKernel<<<Blocks(n), kThreads, 0, stream>>>(x, n, cap);
  return cudaGetLastError();
}

cudaError_t LaunchArgmaxRows(const float* x, int64_t n, const int32_t* rows, int64_t n_rows, ArgmaxOut* out,
                             cudaStream_t stream) {
  if (n_rows == 0) return cudaSuccess;
  ArgmaxRowsKernel<<<static_cast<unsigned>(n_rows), kThreads, 0, stream>>>(x, n, rows, out);
  return cudaGetLastError();
}

cudaError_t LaunchGatherRows(const float* x, int64_t n_cols, const int32_t* rows, int64_t n_rows, float* out,
                             cudaStream_t stream) {
  if (n_rows == 0) return cudaSuccess;
  GatherKernel<<<dim3(Blocks(static_cast<size_t>(n_cols)), static_cast<unsigned>(n_rows)), kThreads, 0, stream>>>(
      x, n_cols, rows, out);
  return cudaGetLastError();
}

cudaError_t LaunchColumns(const float* x, int64_t m, int64_t stride, int64_t n, float* out, cudaStream_t stream) {
  if (m == 0 || n == 0) return cudaSuccess;
  if (n > stride) return cudaErrorInvalidValue;
  ColumnsKernel<<<dim3(Blocks(static_cast<size_t>(n)), static_cast<unsigned>(m)), kThreads, 0, stream>>>(x, stride, n,
                                                                                                           out);
  return cudaGetLastError();
}

cudaError_t LaunchScatterRows(const float* src, int64_t n_cols, const int32_t* rows, int64_t n_rows, float* y,
                              cudaStream_t stream) {
  if (n_rows == 0) return cudaSuccess;
  ScatterKernel<<<dim3(Blocks(static_cast<size_t>(n_cols)), static_cast<unsigned>(n_rows)), kThreads, 0, stream>>>(
      src, n_cols, rows, y);
  return cudaGetLastError();
}

cudaError_t LaunchSplitColumns(const float* src, int64_t m, const ColumnParts& parts, cudaStream_t stream) {
  if (m == 0 || parts.count == 0) return cudaSuccess;
  if (parts.count > kMaxColumnParts) return cudaErrorInvalidValue;
  SplitColumnsKernel<<<dim3(Blocks(static_cast<size_t>(parts.first[parts.count])), static_cast<unsigned>(m)), kThreads,
                       0, stream>>>(src, parts);
  return cudaGetLastError();
}

cudaError_t LaunchToHalf(const float* x, size_t n, Half type, void* out, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  ToHalfKernel<<<Blocks(n), kThreads, 0, stream>>>(x, n, type, out);
  return cudaGetLastError();
}

cudaError_t LaunchStoreKv(const KvArgs& kv, const float* k, const float* v, const int32_t* positions,
                          int64_t m, cudaStream_t stream) {
  if (m == 0) return cudaSuccess;
  StoreKvKernel<<<dim3(Blocks(static_cast<size_t>(kv.kv_dim)), static_cast<unsigned>(m)), kThreads, 0, stream>>>(
      kv, k, v, positions);
  return cudaGetLastError();
}

cudaError_t LaunchAttention(const KvArgs& kv, const float* q, const int32_t* positions, int64_t m,
                            int64_t n_head, int64_t n_head_kv, int64_t head_dim, const AttentionArgs& args,
                            const AttentionSpans& spans, float* out, cudaStream_t stream) {
  if (m == 0) return cudaSuccess;
  if (head_dim > 32 * kMaxDimsPerLane || n_head % n_head_kv != 0) return cudaErrorInvalidValue;
  if (spans.max_spans > 1 && (spans.rows == nullptr || spans.partial == nullptr)) return cudaErrorInvalidValue;
  if (spans.n_tiles > 0 && (spans.rows == nullptr || spans.tiles == nullptr)) return cudaErrorInvalidValue;
  const int64_t wave_rows = spans.wave_rows < 0 ? m - spans.first_row : spans.wave_rows;
  if (spans.first_row < 0 || wave_rows < 1 || spans.first_row + wave_rows > m) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(n_head), static_cast<unsigned>(wave_rows),
                  static_cast<unsigned>(spans.max_spans));
  AttentionKernel<<<grid, 32 * kWarps, 0, stream>>>(kv, q, positions, n_head, n_head_kv, head_dim, args, spans,
                                                   out);
  if (spans.n_tiles > 0) {
    const dim3 tiles(static_cast<unsigned>(n_head), static_cast<unsigned>(spans.n_tiles));
    if (head_dim <= 128) {
      TileAttentionKernel<32><<<tiles, kTileThreads, 0, stream>>>(kv, q, positions, n_head, n_head_kv, head_dim,
                                                                 args, spans.tiles, out);
    } else {
      TileAttentionKernel<64><<<tiles, kTileThreads, 0, stream>>>(kv, q, positions, n_head, n_head_kv, head_dim,
                                                                 args, spans.tiles, out);
    }
  }
  if (spans.max_spans > 1) {
    AttentionMergeKernel<<<dim3(static_cast<unsigned>(n_head), static_cast<unsigned>(wave_rows)), 32, 0, stream>>>(
        spans, n_head, head_dim, out);
  }
  return cudaGetLastError();
}

}  // namespace llm42::cuda
