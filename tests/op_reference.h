#ifndef LLM42_TESTS_OP_REFERENCE_H_
#define LLM42_TESTS_OP_REFERENCE_H_

// Test inputs for backend ops and their float64 references (the references the backends are
// held to: exact sums in double, not another backend's output).
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "lib/util/ggml_types.h"
#include "tests/quant_reference.h"

namespace llm42::testing {

// A weight matrix in `type` with its exact f32 values alongside.
struct TestMatrix {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
  size_t row_bytes = 0;
};

inline TestMatrix MakeMatrix(GgmlType type, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  TestMatrix m;
  m.values.resize(static_cast<size_t>(rows * cols));
  if (type == GgmlType::kQ8_0) {
    m.row_bytes = static_cast<size_t>(cols / kQ8_0BlockSize) * sizeof(BlockQ8_0);
    m.bytes.resize(m.row_bytes * static_cast<size_t>(rows));
    auto* blocks = reinterpret_cast<BlockQ8_0*>(m.bytes.data());
    for (int64_t b = 0; b < rows * cols / kQ8_0BlockSize; ++b) {
      blocks[b].scale = Fp32ToFp16(0.01f + 0.001f * static_cast<float>(b % 7));
      for (int j = 0; j < kQ8_0BlockSize; ++j) {
        blocks[b].q[j] = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
        m.values[static_cast<size_t>(b * kQ8_0BlockSize + j)] = Fp16ToFp32(blocks[b].scale) * blocks[b].q[j];
      }
    }
    return m;
  }
  if (type == GgmlType::kQ4_0) {  // ggml's layout: low nibbles are elements 0-15, high 16-31
    m.row_bytes = static_cast<size_t>(cols / kQ4_0BlockSize) * sizeof(BlockQ4_0);
    m.bytes.resize(m.row_bytes * static_cast<size_t>(rows));
    auto* blocks = reinterpret_cast<BlockQ4_0*>(m.bytes.data());
    for (int64_t b = 0; b < rows * cols / kQ4_0BlockSize; ++b) {
      blocks[b].scale = Fp32ToFp16(0.1f + 0.01f * static_cast<float>(b % 7));
      const float d = Fp16ToFp32(blocks[b].scale);
      for (int j = 0; j < 16; ++j) {
        const int lo = static_cast<int>(rng() % 16), hi = static_cast<int>(rng() % 16);
        blocks[b].q[j] = static_cast<uint8_t>(lo | (hi << 4));
        m.values[static_cast<size_t>(b * kQ4_0BlockSize + j)] = d * static_cast<float>(lo - 8);
        m.values[static_cast<size_t>(b * kQ4_0BlockSize + j + 16)] = d * static_cast<float>(hi - 8);
      }
    }
    return m;
  }
  if (const int64_t block = GetGgmlTypeInfo(static_cast<uint32_t>(type))->block_size; block > 1) {
    // The other block types: random blocks, their values by the written-out definitions.
    const int64_t n_blocks = rows * cols / block;
    m.bytes = RandomBlocks(type, n_blocks, rng, UnitScale(type));
    m.row_bytes = m.bytes.size() / static_cast<size_t>(rows);
    const auto bytes = static_cast<size_t>(GetGgmlTypeInfo(static_cast<uint32_t>(type))->block_bytes);
    for (int64_t b = 0; b < n_blocks; ++b) {
      ReferenceDequantizeBlock(type, m.bytes.data() + static_cast<size_t>(b) * bytes, m.values.data() + b * block);
    }
    return m;
  }
  const size_t es = type == GgmlType::kF32 ? 4 : 2;
  m.row_bytes = static_cast<size_t>(cols) * es;
  m.bytes.resize(m.row_bytes * static_cast<size_t>(rows));
  for (size_t i = 0; i < m.values.size(); ++i) {
    const float f = dist(rng);
    if (type == GgmlType::kF32) {
      std::memcpy(m.bytes.data() + 4 * i, &f, 4);
      m.values[i] = f;
    } else {
      const uint16_t h = type == GgmlType::kF16 ? Fp32ToFp16(f) : Fp32ToBf16(f);
      std::memcpy(m.bytes.data() + 2 * i, &h, 2);
      m.values[i] = type == GgmlType::kF16 ? Fp16ToFp32(h) : Bf16ToFp32(h);
    }
  }
  return m;
}

inline std::vector<float> RandomVector(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

inline bool SameBits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

// x[m][k] times w[n][k] (w's exact values), in double, and the sum of |products| per output
// (the scale of its rounding error).
inline void ReferenceMatMul(const std::vector<float>& x, int64_t m, const std::vector<float>& w,
                            int64_t n, int64_t k, std::vector<double>* y, std::vector<double>* magnitude) {
  y->assign(static_cast<size_t>(m * n), 0.0);
  magnitude->assign(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t r = 0; r < n; ++r) {
      double s = 0, mag = 0;
      for (int64_t j = 0; j < k; ++j) {
        const double p = static_cast<double>(x[static_cast<size_t>(i * k + j)]) * w[static_cast<size_t>(r * k + j)];
        s += p;
        mag += std::fabs(p);
      }
      (*y)[static_cast<size_t>(i * n + r)] = s;
      (*magnitude)[static_cast<size_t>(i * n + r)] = mag;
    }
  }
}

// Per output of x * w^T: the most that rounding each activation to 8 bits per 32-value block
// (llama.cpp's q8_0 activations: steps of max|x| / 127 in its block, half a step at most) can
// move the dot product: sum over j of |w[r][j]| * step(j) / 2. The fast schedule may quantize
// activations so for quantized weights.
inline std::vector<double> ActivationQ8Bound(const std::vector<float>& x, int64_t m, const std::vector<float>& w,
                                             int64_t n, int64_t k) {
  std::vector<double> bound(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    std::vector<double> half_step(static_cast<size_t>(k));
    for (int64_t b = 0; b < k / 32; ++b) {
      double amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(static_cast<double>(x[static_cast<size_t>(i * k + 32 * b + j)])));
      for (int j = 0; j < 32; ++j) half_step[static_cast<size_t>(32 * b + j)] = amax / 127 / 2;
    }
    for (int64_t r = 0; r < n; ++r) {
      double s = 0;
      for (int64_t j = 0; j < k; ++j) s += std::fabs(w[static_cast<size_t>(r * k + j)]) * half_step[static_cast<size_t>(j)];
      bound[static_cast<size_t>(i * n + r)] = s * 1.01;  // and the scale's own rounding
    }
  }
  return bound;
}

// Softmax attention of one head's query over len keys and values (row t of keys/values at
// key(t), value(t), head_dim wide), in double; with a sink, exp(*sink) joins the softmax's sum.
template <typename KeyFn, typename ValueFn>
std::vector<double> ReferenceAttention(const float* q, int64_t len, int64_t head_dim, KeyFn key, ValueFn value,
                                       const float* sink = nullptr) {
  std::vector<double> sc(static_cast<size_t>(len));
  double mx = sink != nullptr ? *sink : -1e300, sum = 0;
  for (int64_t t = 0; t < len; ++t) {
    double d = 0;
    for (int64_t i = 0; i < head_dim; ++i) d += static_cast<double>(q[i]) * key(t)[i];
    sc[static_cast<size_t>(t)] = d / std::sqrt(static_cast<double>(head_dim));
    mx = std::max(mx, sc[static_cast<size_t>(t)]);
  }
  for (double& x : sc) sum += (x = std::exp(x - mx));
  if (sink != nullptr) sum += std::exp(*sink - mx);
  std::vector<double> o(static_cast<size_t>(head_dim), 0.0);
  for (int64_t t = 0; t < len; ++t) {
    for (int64_t i = 0; i < head_dim; ++i) o[static_cast<size_t>(i)] += sc[static_cast<size_t>(t)] / sum * value(t)[i];
  }
  return o;
}

}  // namespace llm42::testing

#endif  // LLM42_TESTS_OP_REFERENCE_H_
