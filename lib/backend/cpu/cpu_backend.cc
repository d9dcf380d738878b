#include "lib/backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

#include "lib/backend/cpu/row_dot.h"

namespace llm42 {
namespace {

constexpr int64_t kXTile = 32;  // activation rows kept hot in cache while a weight chunk streams
// Below this many multiply-adds an op runs on the calling thread: waking the pool costs more.
constexpr int64_t kMinParallelWork = 1 << 16;

}  // namespace

int DefaultThreadCount() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

CpuBackend::CpuBackend(int n_threads, bool allow_simd)
    : pool_(n_threads > 0 ? n_threads : DefaultThreadCount()),
      simd_(allow_simd && internal::CpuHasAvx2()) {}

void CpuBackend::MatMul(const float* x, int64_t m, const WeightMatrix& w, float* y) {
  const internal::RowDotFn dot = internal::SelectRowDot(w.type, simd_);
  const int64_t k = w.cols, n = w.rows;
  // Enough chunks per thread to balance load, large enough to amortize the hand-out.
  const int64_t grain = m * k * n < kMinParallelWork ? n : std::max<int64_t>(4, n / (pool_.size() * 8));
  pool_.ParallelFor(n, grain, [&](int64_t r0, int64_t r1) {
    const float* xs[internal::kMaxRowDotX];
    float out[internal::kMaxRowDotX];
    for (int64_t t0 = 0; t0 < m; t0 += kXTile) {
      const int64_t t1 = std::min(m, t0 + kXTile);
      for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* row = w.row(r);
        for (int64_t b = t0; b < t1; b += internal::kMaxRowDotX) {
          const int nb = static_cast<int>(std::min<int64_t>(internal::kMaxRowDotX, t1 - b));
          for (int j = 0; j < nb; ++j) xs[j] = x + (b + j) * k;
          dot(row, xs, nb, k, out);
          for (int j = 0; j < nb; ++j) y[(b + j) * n + r] = out[j];
        }
      }
    }
  });
}

void CpuBackend::RmsNorm(const float* x, const float* weight, int64_t m, int64_t n, float eps,
                         float* y) {
  for (int64_t i = 0; i < m; ++i) {
    const float* xi = x + i * n;
    float* yi = y + i * n;
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) sum += static_cast<double>(xi[j] * xi[j]);
    const float scale = 1.0f / std::sqrt(static_cast<float>(sum / static_cast<double>(n)) + eps);
    for (int64_t j = 0; j < n; ++j) yi[j] = xi[j] * scale * weight[j];
  }
}

void CpuBackend::Rope(float* x, int64_t m, int64_t n_heads, int64_t head_dim, int64_t n_rot,
                      const int32_t* positions, float freq_base) {
  const float theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(n_rot));
  std::vector<float> cs(static_cast<size_t>(n_rot));
  for (int64_t i = 0; i < m; ++i) {
    float theta = static_cast<float>(positions[i]);
    for (int64_t d = 0; d < n_rot; d += 2) {
      cs[static_cast<size_t>(d)] = std::cos(theta);
      cs[static_cast<size_t>(d) + 1] = std::sin(theta);
      theta *= theta_scale;
    }
    for (int64_t h = 0; h < n_heads; ++h) {
      float* v = x + (i * n_heads + h) * head_dim;
      for (int64_t d = 0; d < n_rot; d += 2) {
        const float c = cs[static_cast<size_t>(d)], s = cs[static_cast<size_t>(d) + 1];
        const float a = v[d], b = v[d + 1];
        v[d] = a * c - b * s;
        v[d + 1] = a * s + b * c;
      }
    }
  }
}

void CpuBackend::Attention(const float* q, const AttentionInput& in, float* out) {
  const int64_t hd = in.head_dim, n_head = in.n_head;
  const int64_t group = n_head / in.n_head_kv;
  const int64_t kv_dim = in.n_head_kv * hd;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  int64_t work = 0;
  for (int64_t i = 0; i < in.n_tokens; ++i) work += (in.positions[i] + 1) * n_head * hd;
  const int64_t items = in.n_tokens * n_head;
  pool_.ParallelFor(items, work < kMinParallelWork ? items : 1, [&](int64_t w0, int64_t w1) {
    thread_local std::vector<float> scores;
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t i = w / n_head, h = w % n_head;
      const int64_t len = in.positions[i] + 1;
      const float* qh = q + (i * n_head + h) * hd;
      const float* k = in.k[i] + (h / group) * hd;
      const float* v = in.v[i] + (h / group) * hd;
      scores.resize(static_cast<size_t>(len));
      float max_score = -INFINITY;
      for (int64_t t = 0; t < len; ++t) {
        const float* kt = k + t * kv_dim;
        float s = 0;
        for (int64_t d = 0; d < hd; ++d) s += qh[d] * kt[d];
        s *= scale;
        scores[static_cast<size_t>(t)] = s;
        max_score = std::max(max_score, s);
      }
      double sum = 0;
      for (int64_t t = 0; t < len; ++t) {
        const float e = std::exp(scores[static_cast<size_t>(t)] - max_score);
        scores[static_cast<size_t>(t)] = e;
        sum += e;
      }
      const float inv = static_cast<float>(1.0 / sum);
      float* o = out + (i * n_head + h) * hd;
      std::fill(o, o + hd, 0.0f);
      for (int64_t t = 0; t < len; ++t) {
        const float p = scores[static_cast<size_t>(t)] * inv;
        const float* vt = v + t * kv_dim;
        for (int64_t d = 0; d < hd; ++d) o[d] += p * vt[d];
      }
    }
  });
}

void CpuBackend::SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void CpuBackend::Embed(const WeightMatrix& table, const int32_t* tokens, int64_t m, float* out) {
  for (int64_t i = 0; i < m; ++i) {
    internal::DequantizeRow(table.type, table.row(tokens[i]), table.cols, out + i * table.cols);
  }
}

}  // namespace llm42
