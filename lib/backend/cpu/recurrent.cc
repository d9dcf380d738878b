#include "lib/backend/cpu/recurrent.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "lib/numerics/portable_math.h"

namespace llm42::internal {
namespace {

float Silu(float x) { return x / (1.0f + PortableExpf(-x)); }

// llama.cpp's softplus: x past 20 as it is, else log(1 + e^x).
float Softplus(float x) {
  return x > 20.0f ? x : static_cast<float>(PortableLog(static_cast<double>(1.0f + PortableExpf(x))));
}

// x / sqrt(sum x^2 + eps) as llama.cpp computes it (RMSNorm with eps / n, then 1 / sqrt(n)): the
// squares summed in double, in order.
void L2Normalize(const float* x, int64_t n, float eps, float* y) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float nf = static_cast<float>(n);
  const float scale = 1.0f / std::sqrt(static_cast<float>(sum / static_cast<double>(n)) + eps / nf);
  const float root = 1.0f / std::sqrt(nf);
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale * root;
}

}  // namespace

absl::Status RecurrentState::Allocate(const RecurrentShape& shape) {
  if (shape.n_layers < 0 || shape.n_slots < 0 || shape.conv_kernel < 1 || shape.heads < 0 || shape.head_dim < 0) {
    return absl::InvalidArgumentError("AllocateRecurrent: a negative size or a convolution narrower than 1");
  }
  shape_ = RecurrentShape{};
  state_.clear();
  state_.shrink_to_fit();
  state_.assign(static_cast<size_t>(shape.n_slots * shape.slot_floats()), 0.0f);
  shape_ = shape;
  return absl::OkStatus();
}

absl::Status RecurrentState::CheckSlot(int32_t slot, bool zero_ok) const {
  if ((slot >= 0 && slot < shape_.n_slots) || (zero_ok && slot == RecurrentRow::kZeroState)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("recurrent state slot ", slot, " of ", shape_.n_slots));
}

absl::Status RecurrentState::Copy(int32_t from, int32_t to) {
  if (absl::Status st = CheckSlot(from, true); !st.ok()) return st;
  if (absl::Status st = CheckSlot(to, false); !st.ok()) return st;
  float* dst = Layer(to, 0);
  const auto n = static_cast<size_t>(shape_.slot_floats());
  if (from == RecurrentRow::kZeroState) {
    std::fill_n(dst, n, 0.0f);
  } else if (from != to) {
    std::memcpy(dst, Layer(from, 0), n * sizeof(float));
  }
  return absl::OkStatus();
}

absl::Status RecurrentState::Read(int32_t slot, std::span<float> host) const {
  if (absl::Status st = CheckSlot(slot, false); !st.ok()) return st;
  if (static_cast<int64_t>(host.size()) != shape_.slot_floats()) {
    return absl::InvalidArgumentError(absl::StrCat("a recurrent slot holds ", shape_.slot_floats(), " values, not ", host.size()));
  }
  std::copy_n(state_.data() + static_cast<size_t>(slot) * host.size(), host.size(), host.data());
  return absl::OkStatus();
}

absl::Status RecurrentState::Write(int32_t slot, std::span<const float> host) {
  if (absl::Status st = CheckSlot(slot, false); !st.ok()) return st;
  if (static_cast<int64_t>(host.size()) != shape_.slot_floats()) {
    return absl::InvalidArgumentError(absl::StrCat("a recurrent slot holds ", shape_.slot_floats(), " values, not ", host.size()));
  }
  std::copy_n(host.data(), host.size(), Layer(slot, 0));
  return absl::OkStatus();
}

absl::Status RecurrentState::Plan(std::span<const RecurrentRow> rows) {
  runs_.clear();
  snapshots_.clear();
  for (size_t i = 0; i < rows.size(); ++i) {
    const RecurrentRow& r = rows[i];
    if (absl::Status st = CheckSlot(r.slot, false); !st.ok()) return st;
    if (r.snapshot != RecurrentRow::kNone) {
      if (absl::Status st = CheckSlot(r.snapshot, false); !st.ok()) return st;
    }
    snapshots_.push_back(r.snapshot);
    const auto row = static_cast<int64_t>(i);
    if (!runs_.empty() && runs_.back().slot == r.slot && runs_.back().end == row) {
      if (r.from != RecurrentRow::kNone) {
        return absl::InvalidArgumentError(absl::StrCat("batch row ", i, " restores the state of a run it continues"));
      }
      runs_.back().end = row + 1;
      continue;
    }
    for (const Run& run : runs_) {
      if (run.slot == r.slot) return absl::InvalidArgumentError(absl::StrCat("recurrent slot ", r.slot, "'s rows are apart"));
    }
    if (r.from != RecurrentRow::kNone) {
      if (absl::Status st = CheckSlot(r.from, true); !st.ok()) return st;
    }
    runs_.push_back({row, row + 1, r.slot, r.from});
  }
  return absl::OkStatus();
}

absl::Status RecurrentState::CausalConv(int64_t layer, const float* x, const float* weight, float* out,
                                        const ParallelFn& parallel) {
  if (layer < 0 || layer >= shape_.n_layers) return absl::InvalidArgumentError(absl::StrCat("CausalConv: layer ", layer));
  const int64_t ch = shape_.conv_channels, k = shape_.conv_kernel, past = k - 1;
  for (const Run& run : runs_) {
    float* state = Layer(run.slot, layer);
    const float* start = run.from == RecurrentRow::kNone ? state
                         : run.from == RecurrentRow::kZeroState ? nullptr
                                                                : Layer(run.from, layer);
    parallel(ch, [&](int64_t c0, int64_t c1) {
      std::vector<float> window(static_cast<size_t>(k));
      for (int64_t c = c0; c < c1; ++c) {
        for (int64_t i = 0; i < past; ++i) window[static_cast<size_t>(i)] = start != nullptr ? start[i * ch + c] : 0.0f;
        const float* w = weight + c * k;
        for (int64_t r = run.begin; r < run.end; ++r) {
          window[static_cast<size_t>(past)] = x[r * ch + c];
          float sum = 0.0f;
          for (int64_t i = 0; i < k; ++i) sum += window[static_cast<size_t>(i)] * w[i];
          out[r * ch + c] = Silu(sum);
          for (int64_t i = 0; i < past; ++i) window[static_cast<size_t>(i)] = window[static_cast<size_t>(i + 1)];
          if (const int32_t snap = snapshots_[static_cast<size_t>(r)]; snap != RecurrentRow::kNone) {
            float* s = Layer(snap, layer);
            for (int64_t i = 0; i < past; ++i) s[i * ch + c] = window[static_cast<size_t>(i)];
          }
        }
        for (int64_t i = 0; i < past; ++i) state[i * ch + c] = window[static_cast<size_t>(i)];
      }
    });
  }
  return absl::OkStatus();
}

absl::Status RecurrentState::DeltaRule(int64_t layer, const Backend::DeltaRuleArgs& a, float* out,
                                       const ParallelFn& parallel) {
  const DeltaRuleShape& h = a.shape;
  if (layer < 0 || layer >= shape_.n_layers || h.value_heads != shape_.heads || h.head_dim != shape_.head_dim ||
      h.key_heads <= 0 || h.conv_channels() != shape_.conv_channels) {
    return absl::InvalidArgumentError(absl::StrCat("DeltaRule: layer ", layer, " of heads ", h.key_heads, "/",
                                                   h.value_heads, " x ", h.head_dim, " beside the state's"));
  }
  const int64_t d = h.head_dim, hv = h.value_heads, ch = h.conv_channels(), matrix = d * d;
  const float out_scale = 1.0f / std::sqrt(static_cast<float>(d));
  const auto n_runs = static_cast<int64_t>(runs_.size());
  parallel(n_runs * hv, [&](int64_t t0, int64_t t1) {
    std::vector<float> q(static_cast<size_t>(d)), k(static_cast<size_t>(d)), acc(static_cast<size_t>(d));
    for (int64_t t = t0; t < t1; ++t) {
      const Run& run = runs_[static_cast<size_t>(t / hv)];
      const int64_t head = t % hv, kh = head % h.key_heads;
      float* s = Layer(run.slot, layer) + shape_.conv_floats() + head * matrix;
      if (run.from == RecurrentRow::kZeroState) {
        std::fill_n(s, matrix, 0.0f);
      } else if (run.from != RecurrentRow::kNone) {
        std::copy_n(Layer(run.from, layer) + shape_.conv_floats() + head * matrix, matrix, s);
      }
      for (int64_t r = run.begin; r < run.end; ++r) {
        const float* row = a.qkv + r * ch;
        L2Normalize(row + kh * d, d, h.eps, q.data());
        L2Normalize(row + (h.key_heads + kh) * d, d, h.eps, k.data());
        const float* v = row + (2 * h.key_heads + head) * d;
        const float decay = PortableExpf(Softplus(a.alpha[r * hv + head] + a.dt_bias[head]) * a.a[head]);
        const float rate = 1.0f / (1.0f + PortableExpf(-a.beta[r * hv + head]));
        // S *= decay, and acc = S^T k over the decayed S (key index in order).
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t i = 0; i < d; ++i) {
          float* si = s + i * d;
          const float ki = k[static_cast<size_t>(i)];
          for (int64_t j = 0; j < d; ++j) {
            si[j] *= decay;
            acc[static_cast<size_t>(j)] += si[j] * ki;
          }
        }
        // delta = rate (v - S^T k); S += k delta^T; acc = S^T q over the updated S.
        for (int64_t j = 0; j < d; ++j) acc[static_cast<size_t>(j)] = (v[j] - acc[static_cast<size_t>(j)]) * rate;
        float* o = out + r * hv * d + head * d;
        std::fill_n(o, d, 0.0f);
        for (int64_t i = 0; i < d; ++i) {
          float* si = s + i * d;
          const float ki = k[static_cast<size_t>(i)], qi = q[static_cast<size_t>(i)];
          for (int64_t j = 0; j < d; ++j) {
            si[j] += ki * acc[static_cast<size_t>(j)];
            o[j] += si[j] * qi;
          }
        }
        for (int64_t j = 0; j < d; ++j) o[j] *= out_scale;
        if (const int32_t snap = snapshots_[static_cast<size_t>(r)]; snap != RecurrentRow::kNone) {
          std::copy_n(s, matrix, Layer(snap, layer) + shape_.conv_floats() + head * matrix);
        }
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace llm42::internal
