#include "lib/backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

#include "lib/backend/cpu/row_dot.h"
#include "lib/util/portable_math.h"

namespace llm42 {
namespace {

constexpr int64_t kXTile = 32;  // activation rows kept hot in cache while a weight chunk streams
// Below this many multiply-adds an op runs on the calling thread: waking the pool costs more.
constexpr int64_t kMinParallelWork = 1 << 16;

// Dot product with 8 lane accumulators and a fixed reduction tree. The build compiles with
// -ffp-contract=off, so whether or not the compiler vectorizes the lanes, the bits are the same.
inline float Dot8(const float* a, const float* b, int64_t n) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  }
  float s = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// Softmax state of attention over part of a prefix: max score, sum of exp(score - max), and
// the exp-weighted sum of values.
struct Partial {
  float max = -INFINITY;
  float sum = 0;
};

// Attends q over positions [begin, end) of one KV head: writes the partial's unnormalized
// output to o[hd].
Partial AttendRange(const float* q, const KvLayerView& kv, const int32_t* table, int64_t kv_head,
                    int64_t hd, float scale, int64_t begin, int64_t end, float* scores, float* o) {
  Partial p;
  const int64_t off = kv_head * hd;
  for (int64_t t = begin; t < end; ++t) {
    const float s = Dot8(q, kv.key(table, t) + off, hd) * scale;
    scores[t - begin] = s;
    p.max = std::max(p.max, s);
  }
  std::fill(o, o + hd, 0.0f);
  for (int64_t t = begin; t < end; ++t) {
    const float e = PortableExpf(scores[t - begin] - p.max);
    p.sum += e;
    const float* v = kv.value(table, t) + off;
    for (int64_t d = 0; d < hd; ++d) o[d] += e * v[d];
  }
  return p;
}

// Folds partial b (output ob) into a (output oa).
void Combine(Partial& a, float* oa, const Partial& b, const float* ob, int64_t hd) {
  const float m = std::max(a.max, b.max);
  const float ca = PortableExpf(a.max - m), cb = PortableExpf(b.max - m);
  a.sum = a.sum * ca + b.sum * cb;
  for (int64_t d = 0; d < hd; ++d) oa[d] = oa[d] * ca + ob[d] * cb;
  a.max = m;
}

}  // namespace

int DefaultThreadCount() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

CpuBackend::CpuBackend(int n_threads, bool allow_simd)
    : pool_(n_threads > 0 ? n_threads : DefaultThreadCount()),
      simd_(allow_simd && internal::CpuHasAvx2()) {}

void CpuBackend::MatMul(const float* x, int64_t m, const WeightMatrix& w, float* y, Schedules s) {
  const int64_t k = w.cols, n = w.rows;
  // Rows of each schedule go through their own kernel family; a weight row is streamed once for
  // both while it is hot in cache.
  struct Family {
    internal::RowDotFn dot;
    int64_t group;
    std::vector<int64_t>& rows;
  };
  Family fast{internal::SelectRowDot(w.type, internal::DotFamily::kFast, simd_),
              internal::kMaxRowDotX, fast_rows_};
  Family fixed{internal::SelectRowDot(w.type, internal::DotFamily::kFixed, simd_),
               internal::kMaxFixedRowDotX, fixed_rows_};
  fast_rows_.clear();
  fixed_rows_.clear();
  for (int64_t i = 0; i < m; ++i) (s[i] == Schedule::kFixed ? fixed : fast).rows.push_back(i);
  // Enough chunks per thread to balance load, large enough to amortize the hand-out.
  const int64_t grain =
      m * k * n < kMinParallelWork ? n : std::max<int64_t>(4, n / (pool_.size() * 8));
  const internal::TileDotFn tile = internal::SelectTileDot(w.type, simd_);
  const internal::Gemv4Fn gemv4 = internal::SelectFixedGemv4(w.type, simd_);
  pool_.ParallelFor(n, grain, [&](int64_t r0, int64_t r1) {
    const float* xs[internal::kMaxRowDotX];
    const uint8_t* ws[4];
    float out[2 * internal::kMaxRowDotX];
    for (const Family* f : {&fast, &fixed}) {
      const auto count = static_cast<int64_t>(f->rows.size());
      for (int64_t t0 = 0; t0 < count; t0 += kXTile) {
        const int64_t t1 = std::min(count, t0 + kXTile);
        for (int64_t r = r0; r < r1;) {
          // Full groups of 4 activation rows: two weight rows at a time (both families); fixed
          // rows in smaller groups (decode): four weight rows at a time.
          const bool pair = tile != nullptr && r + 1 < r1 && t1 - t0 >= 4;
          const bool quad = f == &fixed && gemv4 != nullptr && r + 3 < r1 && t1 - t0 < 4;
          const int64_t step = quad ? 4 : pair ? 2 : 1;
          for (int64_t b = t0; b < t1; b += f->group) {
            const int nb = static_cast<int>(std::min(f->group, t1 - b));
            for (int j = 0; j < nb; ++j) xs[j] = x + f->rows[static_cast<size_t>(b + j)] * k;
            if (pair && nb == 4) {
              tile(w.row(r), w.row(r + 1), xs, k, out);
              for (int j = 0; j < 4; ++j) {
                float* yr = y + f->rows[static_cast<size_t>(b + j)] * n + r;
                yr[0] = out[2 * j];
                yr[1] = out[2 * j + 1];
              }
              continue;
            }
            if (quad) {
              for (int q = 0; q < 4; ++q) ws[q] = w.row(r + q);
              for (int j = 0; j < nb; ++j) {
                gemv4(ws, xs[j], k, out);
                std::copy_n(out, 4, y + f->rows[static_cast<size_t>(b + j)] * n + r);
              }
              continue;
            }
            for (int64_t rr = r; rr < r + step; ++rr) {
              f->dot(w.row(rr), xs, nb, k, out);
              for (int j = 0; j < nb; ++j) y[f->rows[static_cast<size_t>(b + j)] * n + rr] = out[j];
            }
          }
          r += step;
        }
      }
    }
  });
}

void CpuBackend::RmsNorm(const float* x, const float* weight, int64_t m, int64_t n, float eps,
                         float* y, Schedules) {
  for (int64_t i = 0; i < m; ++i) {
    const float* xi = x + i * n;
    float* yi = y + i * n;
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) sum += static_cast<double>(xi[j] * xi[j]);
    const float scale = 1.0f / std::sqrt(static_cast<float>(sum / static_cast<double>(n)) + eps);
    for (int64_t j = 0; j < n; ++j) yi[j] = xi[j] * scale * weight[j];
  }
}

void CpuBackend::Rope(float* x, int64_t m, int64_t n_heads, int64_t head_dim,
                      const RopeParams& rope, const int32_t* positions, Schedules) {
  const int64_t half = rope.n_rot / 2;
  const auto theta_scale = static_cast<float>(
      PortablePow(rope.freq_base, -2.0 / static_cast<double>(rope.n_rot)));
  // Pair p rotates elements (first(p), first(p) + stride).
  const int64_t stride = rope.neox ? half : 1;
  const int64_t step = rope.neox ? 1 : 2;
  thread_local std::vector<float> cs;
  cs.resize(static_cast<size_t>(rope.n_rot));
  for (int64_t i = 0; i < m; ++i) {
    float theta = static_cast<float>(positions[i]) * rope.freq_scale;
    for (int64_t p = 0; p < half; ++p) {
      const float t = rope.freq_factors != nullptr ? theta / rope.freq_factors[p] : theta;
      double sin_t, cos_t;
      PortableSinCos(t, &sin_t, &cos_t);
      cs[static_cast<size_t>(2 * p)] = static_cast<float>(cos_t);
      cs[static_cast<size_t>(2 * p) + 1] = static_cast<float>(sin_t);
      theta *= theta_scale;
    }
    for (int64_t h = 0; h < n_heads; ++h) {
      float* v = x + (i * n_heads + h) * head_dim;
      for (int64_t p = 0; p < half; ++p) {
        const float c = cs[static_cast<size_t>(2 * p)], sn = cs[static_cast<size_t>(2 * p) + 1];
        float* a = v + p * step;
        const float x0 = a[0], x1 = a[stride];
        a[0] = x0 * c - x1 * sn;
        a[stride] = x0 * sn + x1 * c;
      }
    }
  }
}

void CpuBackend::Attention(const float* q, const AttentionInput& in, float* out, Schedules s) {
  const int64_t hd = in.head_dim, n_head = in.n_head;
  const int64_t group = n_head / in.n_head_kv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t items = in.n_tokens * n_head;
  int64_t work = 0, longest = 0;
  bool all_fast = true;
  for (int64_t i = 0; i < in.n_tokens; ++i) {
    work += (in.positions[i] + 1) * n_head * hd;
    longest = std::max<int64_t>(longest, in.positions[i] + 1);
    all_fast = all_fast && s[i] == Schedule::kFast;
  }
  const int threads = pool_.size();
  // fast: split each prefix across the threads when there are too few items to occupy them.
  const int64_t splits =
      all_fast && work >= kMinParallelWork && items < 2 * threads && longest >= 2 * threads * 16
          ? threads
          : 1;
  // Each work unit is one (item, part) pair; parts of one item are combined afterwards.
  const int64_t units = items * splits;
  std::vector<float> part_out(splits > 1 ? static_cast<size_t>(units * hd) : 0);
  std::vector<Partial> parts(splits > 1 ? static_cast<size_t>(units) : 0);
  pool_.ParallelFor(units, work < kMinParallelWork ? units : 1, [&](int64_t u0, int64_t u1) {
    thread_local std::vector<float> scores, chunk_out;
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t w = u / splits, part = u % splits;
      const int64_t i = w / n_head, h = w % n_head;
      const int64_t len = in.positions[i] + 1;
      const float* qh = q + (i * n_head + h) * hd;
      const int32_t* table = in.block_tables[i];
      float* o = out + (i * n_head + h) * hd;
      if (splits > 1) {
        const int64_t begin = len * part / splits, end = len * (part + 1) / splits;
        scores.resize(static_cast<size_t>(std::max<int64_t>(1, end - begin)));
        parts[static_cast<size_t>(u)] = AttendRange(qh, in.kv, table, h / group, hd, scale, begin,
                                                    end, scores.data(), part_out.data() + u * hd);
        continue;
      }
      const int64_t chunk = s[i] == Schedule::kFixed ? kAttentionChunk : len;
      scores.resize(static_cast<size_t>(std::min(chunk, len)));
      chunk_out.resize(static_cast<size_t>(hd));
      Partial total = AttendRange(qh, in.kv, table, h / group, hd, scale, 0, std::min(chunk, len),
                                  scores.data(), o);
      for (int64_t begin = chunk; begin < len; begin += chunk) {
        const Partial p = AttendRange(qh, in.kv, table, h / group, hd, scale, begin,
                                      std::min(len, begin + chunk), scores.data(), chunk_out.data());
        Combine(total, o, p, chunk_out.data(), hd);
      }
      const float inv = 1.0f / total.sum;
      for (int64_t d = 0; d < hd; ++d) o[d] *= inv;
    }
  });
  if (splits > 1) {
    for (int64_t w = 0; w < items; ++w) {
      float* o = out + w * hd;
      std::copy_n(part_out.data() + w * splits * hd, hd, o);
      Partial total = parts[static_cast<size_t>(w * splits)];
      for (int64_t part = 1; part < splits; ++part) {
        const int64_t u = w * splits + part;
        if (parts[static_cast<size_t>(u)].sum == 0) continue;  // empty range
        Combine(total, o, parts[static_cast<size_t>(u)], part_out.data() + u * hd, hd);
      }
      const float inv = 1.0f / total.sum;
      for (int64_t d = 0; d < hd; ++d) o[d] *= inv;
    }
  }
}

void CpuBackend::SwiGlu(const float* gate, const float* up, int64_t n, float* out, Schedule) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + PortableExpf(-g)) * up[i];
  }
}

void CpuBackend::Embed(const WeightMatrix& table, const int32_t* tokens, int64_t m, float* out,
                       Schedules) {
  for (int64_t i = 0; i < m; ++i) {
    internal::DequantizeRow(table.type, table.row(tokens[i]), table.cols, out + i * table.cols);
  }
}

}  // namespace llm42
