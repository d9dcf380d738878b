#include "lib/backend/cpu/cpu_backend.h"


#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/backend/cpu/attention.h"
#include "lib/backend/cpu/bf16_gemm.h"
#include "lib/backend/cpu/blas_gemm.h"
#include "lib/backend/cpu/int8_dot.h"
#include "lib/backend/cpu/int8_gemm.h"
#include "lib/backend/cpu/kquant_gemv.h"
#include "lib/backend/cpu/packed_gemm.h"
#include "lib/backend/cpu/round_row.h"
#include "lib/backend/cpu/row_dot.h"
#include "lib/backend/cpu/row_ops.h"
#include "lib/backend/cpu/sum_squares.h"
#include "lib/backend/cpu/weight_loaders.h"
#include "lib/util/platform.h"
#include "lib/numerics/portable_math.h"
#include "lib/util/status.h"
#include "lib/util/thread_scratch.h"

namespace llm42 {
namespace {

constexpr int64_t kXTile = 32;  // activation rows kept hot in cache while a weight chunk streams
// Where the CPU has AVX2 (or AVX-512), rows of one schedule go through the register-blocked GEMM
// (packed_gemm.h): from kDirectMinRows reading the weight rows as they are (DirectGemm), from
// kPackedMinRows packing them first (measured with AVX-512 on llama-110m f16, 2 threads: direct
// 229-263 GFLOP/s at 8-32 rows where packed ran 98-187, packed ahead from about 128 rows). A
// single row (decode of one sequence) takes the wide GEMV.
constexpr int64_t kDirectMinRows = 2;
constexpr int64_t kPackedMinRows = 96;
// fast rows from which BLIS takes a prompt's GEMMs (blas_gemm.h): llama-110m's 2048 x 768 f16 and
// f32 matrices on a Zen 3, two threads, BLIS on / off: 89-103 / 110-120 GFLOP/s at 96 rows, mixed
// from 192 to 448, 115-140 / 104-124 at 512 and 1024 (a prompt's steps are 512 tokens by default).
constexpr int64_t kBlasMinRows = 512;
// ... of matrices at least this long in both directions (the reduction length and the output
// rows, all matrices of a MatMulShared together): with its row blocks the packed GEMM beat BLIS on
// llama-110m's (fast GEMMs alone, alternated rounds on a Zen 3: f16 155-172 against 120-141
// GFLOP/s with BLIS for all, where BLIS first converts the f16 rows; f32 139-169 against 135-152;
// BLIS for the 768 x 2048 down projection alone: f16 128-148), BLIS stayed ahead on llama-1b's,
// all of them 2048 or longer both ways (154-163 against 129-145; BLIS only from k = 4096:
// 143-147).
constexpr int64_t kBlasMinSide = 2048;
// Fewer activation rows than this (decode of one to three sequences) run as GEMVs: all of a
// thread's weight rows per kernel call, handed out in guided chunks.
constexpr int64_t kGemvMaxRows = 4;
// fast rows of Q4_K, Q5_K, Q6_K and IQ4_XS up to this many (decode batches) go through
// kquant_gemv.h, four activation rows to each weight super-block unpacked.
constexpr int64_t kKQuantGemvMaxRows = 32;
// The smallest chunk of a decode GEMV's rows handed to a thread (ThreadPool::ParallelForGuided).
constexpr int64_t kGuidedMinRows = 32;
// Below this many multiply-adds an op runs on the calling thread: waking the pool costs more.
constexpr int64_t kMinParallelWork = 1 << 16;

}  // namespace

int DefaultThreadCount() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

CpuBackend::CpuBackend(int n_threads, bool allow_simd, KvDtype kv_dtype)
    : pool_(n_threads > 0 ? n_threads : DefaultThreadCount()),
      simd_(allow_simd && internal::CpuHasAvx2()),
      kv_dtype_(kv_dtype == KvDtype::kAuto ? KvDtype::kF32 : kv_dtype) {}

absl::StatusOr<WeightMatrix> CpuBackend::UploadWeight(const WeightMatrix& host) {
  if (internal::SelectRowDot(host.type, internal::DotFamily::kFast, false) == nullptr) {
    return absl::UnimplementedError(absl::StrCat("the CPU backend has no kernels for ",
                                                 GetGgmlTypeInfo(static_cast<uint32_t>(host.type))->name));
  }
  return host;  // the mapped file's bytes, as they are
}

absl::StatusOr<const float*> CpuBackend::UploadVector(std::span<const float> host) {
  return vectors_.emplace_back(host.begin(), host.end()).data();
}

absl::StatusOr<float*> CpuBackend::Workspace(int slot, size_t n_floats) {
  if (slot < 0) return absl::InvalidArgumentError("negative workspace slot");
  if (workspace_.size() <= static_cast<size_t>(slot)) workspace_.resize(static_cast<size_t>(slot) + 1);
  AlignedVector<float>& w = workspace_[static_cast<size_t>(slot)];
  if (w.size() < n_floats) w.resize(n_floats);
  return w.data();
}

absl::Status CpuBackend::PrefaultKv() {
  if (kv_.Prefault()) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat("cannot make the ", kv_.size() >> 20,
                                                   " MiB KV cache resident: the system has not the memory"));
}

absl::Status CpuBackend::AllocateKv(const KvShape& shape) {
  const auto n = static_cast<size_t>(shape.n_blocks * shape.block_elements()) * kv_element_bytes();
  kv_ = LargeBuffer::Allocate(n);
  if (!kv_) {
    kv_shape_ = KvShape{};
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", n >> 20,
                                                     " MiB of KV cache"));
  }
  kv_shape_ = shape;
  kv_block_elements_ = shape.block_elements();
  kv_layer_offsets_.resize(static_cast<size_t>(shape.n_layers));
  for (int64_t l = 0; l < shape.n_layers; ++l) kv_layer_offsets_[static_cast<size_t>(l)] = shape.layer_offset(l);
  return absl::OkStatus();
}

int64_t CpuBackend::available_memory_bytes() const {
  const int64_t bytes = platform::PhysicalMemoryBytes();
  return bytes > 0 ? bytes : int64_t{8} << 30;
}

absl::Status CpuBackend::CopyFromHost(float* dst, const float* host, size_t n) {
  std::copy_n(host, n, dst);
  return absl::OkStatus();
}

absl::Status CpuBackend::CopyToHost(float* host, const float* src, size_t n) {
  std::copy_n(src, n, host);
  return absl::OkStatus();
}

absl::Status CpuBackend::BeginBatch(const BatchPlan& plan) {
  batch_ = plan;
  rope_cs_.clear();
  // The decode rows and their chunks, once per step rather than per layer: a token alone in its
  // sequence's run of the batch (prompts and verify windows are runs of several).
  const auto n_tokens = static_cast<int64_t>(plan.positions.size());
  const int32_t* const* tables = plan.block_tables.data();
  decode_row_.assign(static_cast<size_t>(n_tokens), 0);
  decode_tokens_.clear();
  decode_first_.clear();
  decode_ranges_.clear();
  for (int64_t i = 0; i < n_tokens; ++i) {
    if ((i > 0 && tables[i - 1] == tables[i]) || (i + 1 < n_tokens && tables[i + 1] == tables[i])) continue;
    decode_row_[static_cast<size_t>(i)] = 1;
    decode_tokens_.push_back(i);
    decode_first_.push_back(static_cast<int64_t>(decode_ranges_.size()));
    const int64_t len = plan.positions[static_cast<size_t>(i)] + 1;
    for (int64_t b = 0; b < len; b += kAttentionChunk) decode_ranges_.push_back({i, b, std::min(len, b + kAttentionChunk)});
  }
  decode_first_.push_back(static_cast<int64_t>(decode_ranges_.size()));
  window_ranges_for_ = 0;
  if (!plan.recurrent.empty() && plan.recurrent.size() != plan.tokens.size()) {
    return absl::InvalidArgumentError(absl::StrCat("a batch of ", plan.tokens.size(), " rows with recurrent state for ",
                                                   plan.recurrent.size()));
  }
  return recurrent_.Plan(plan.recurrent);
}

absl::Status CpuBackend::CausalConv(int64_t layer, const float* x, const float* weight, float* out) {
  return recurrent_.CausalConv(layer, x, weight, out, [&](int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
    pool_.ParallelFor(n, 64, fn);
  });
}

absl::Status CpuBackend::DeltaRule(int64_t layer, const DeltaRuleArgs& args, float* out) {
  return recurrent_.DeltaRule(layer, args, out, [&](int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
    pool_.ParallelFor(n, 1, fn);
  });
}

absl::Status CpuBackend::SigmoidMul(float* x, const float* gate, size_t n) {
  ForRows(static_cast<int64_t>(n), 32, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) x[i] *= 1.0f / (1.0f + PortableExpf(-gate[i]));
  });
  return absl::OkStatus();
}

absl::Status CpuBackend::RouteExperts(const float* logits, int64_t m, const ExpertRouting& routing, int32_t* host_ids,
                                      float* weights) {
  const int64_t n = routing.n_expert, k = routing.n_used;
  pool_.ParallelFor(m, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) RouteToken(routing, logits + r * n, host_ids + r * k, weights + r * k);
  });
  return absl::OkStatus();
}

absl::Status CpuBackend::ScatterRows(const float* x, int64_t n_cols, std::span<const int32_t> rows, float* out) {
  for (size_t r = 0; r < rows.size(); ++r) {
    std::copy_n(x + static_cast<int64_t>(r) * n_cols, n_cols, out + static_cast<int64_t>(rows[r]) * n_cols);
  }
  return absl::OkStatus();
}

absl::Status CpuBackend::MixExperts(const float* y, const float* weights, int64_t m, int64_t k, int64_t n, float* out) {
  ForRows(m, n * k, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* o = out + r * n;
      const float* w = weights + r * k;
      const float* first = y + r * k * n;
      for (int64_t i = 0; i < n; ++i) o[i] = first[i] * w[0];
      for (int64_t s = 1; s < k; ++s) {
        const float* ys = first + s * n;
        for (int64_t i = 0; i < n; ++i) o[i] += ys[i] * w[s];
      }
    }
  });
  return absl::OkStatus();
}

absl::Status CpuBackend::SigmoidScaleRows(float* x, int64_t m, int64_t n, const float* gate) {
  ForRows(m, n, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float s = 1.0f / (1.0f + PortableExpf(-gate[r]));
      for (int64_t i = 0; i < n; ++i) x[r * n + i] *= s;
    }
  });
  return absl::OkStatus();
}

absl::Status CpuBackend::ClampedSwiGlu(const float* gate, const float* up, int64_t m, int64_t n, float alpha,
                                       float limit, float* out) {
  ForRows(m * n, 32, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float g = std::min(gate[i], limit), u = std::clamp(up[i], -limit, limit);
      out[i] = g / (1.0f + PortableExpf(alpha * -g)) * (u + 1.0f);
    }
  });
  return absl::OkStatus();
}

uint8_t* CpuBackend::Key(int64_t layer, const int32_t* table, int64_t p) const {
  const KvShape& k = kv_shape_;
  return kv_.data() + (table[p / k.block_size] * kv_block_elements_ + kv_layer_offsets_[static_cast<size_t>(layer)] +
                       (p % k.block_size) * k.width(layer)) *
                          static_cast<int64_t>(kv_element_bytes());
}

absl::Status CpuBackend::MatMul(const float* x, int64_t m, const WeightMatrix& w, float* y, Schedules s) {
  const MatMulOutput out{&w, y};
  return MatMulShared(x, m, std::span<const MatMulOutput>(&out, 1), s);
}

absl::Status CpuBackend::MatMulShared(const float* x, int64_t m, std::span<const MatMulOutput> outs, Schedules s) {
  LLM42_RETURN_IF_ERROR(SameWidth(outs));
  if (outs.empty()) return absl::OkStatus();
  for (const MatMulOutput& o : outs) {
    if (o.w->type != outs[0].w->type) return Backend::MatMulShared(x, m, outs, s);  // one type's kernels at a time
  }
  const WeightMatrix& w0 = *outs[0].w;
  const int64_t k = w0.cols;
  int64_t total = 0;  // the matrices' rows, one after another
  for (const MatMulOutput& o : outs) total += o.w->rows;
  // Rows of each schedule go through their own kernel family; a weight row is streamed once for
  // both while it is hot in cache.
  struct Family {
    internal::RowDotFn dot;
    int64_t group;
    std::vector<int64_t>& rows;
    internal::Int8Kernels int8;  // q8_0/q4_0 against 8-bit activations (int8_dot.h)
    internal::WideGemv wide;     // decode: many weight rows per activation row
  };
  const auto row_bytes = static_cast<int64_t>(w0.row_bytes);
  Family fast{internal::SelectRowDot(w0.type, internal::DotFamily::kFast, simd_), internal::kMaxRowDotX,
              fast_rows_, internal::SelectInt8Kernels(w0.type, internal::DotFamily::kFast, simd_),
              internal::SelectWideGemv(w0.type, internal::DotFamily::kFast, simd_, row_bytes)};
  Family fixed{internal::SelectRowDot(w0.type, internal::DotFamily::kFixed, simd_), internal::kMaxFixedRowDotX,
               fixed_rows_, internal::SelectInt8Kernels(w0.type, internal::DotFamily::kFixed, simd_),
               internal::SelectWideGemv(w0.type, internal::DotFamily::kFixed, simd_, row_bytes)};
  fast_rows_.clear();
  fixed_rows_.clear();
  for (int64_t i = 0; i < m; ++i) (s[i] == Schedule::kFixed ? fixed : fast).rows.push_back(i);
  // Enough chunks per thread to balance load, large enough to amortize the hand-out.
  int64_t grain = m * k * total < kMinParallelWork ? total : std::max<int64_t>(4, total / (pool_.size() * 8));
  const internal::TileDotFn tile = internal::SelectTileDot(w0.type, simd_);
  const internal::WideGemv gemv4 = internal::SelectFixedGemv4(w0.type, simd_);
  const bool packed = internal::PackedGemmAvailable(simd_) && internal::PackedGemmSupports(w0.type);
  // fast prompt rows of bf16 weights on AVX-512 BF16: bf16 dot products on the rows rounded to
  // bf16 (bf16_gemm.h).
  const bool bf16_dot = w0.type == GgmlType::kBF16 && packed && internal::Bf16GemmAvailable(simd_) &&
                        static_cast<int64_t>(fast_rows_.size()) >= internal::kBf16GemmMinRows;
  // fast prompts through BLIS (blas_gemm.h): one chunk of weight rows per thread, each BLAS call
  // packing all the activation rows again.
  const bool blas = !bf16_dot && internal::BlasGemmAvailable() &&
                    static_cast<int64_t>(fast_rows_.size()) >= kBlasMinRows && k >= kBlasMinSide &&
                    total >= kBlasMinSide;
  if (blas && grain < total) grain = (total + pool_.size() - 1) / pool_.size();
  // A few rows of float weights (DirectGemm, the batched decode of 2-95 sequences): one run of
  // consecutive weight rows per thread, so that each thread's read-ahead (two panels on) runs
  // unbroken from its first panel to its last, where chunks of an eighth of a thread's share each
  // started cold and ended fetching the next chunk's rows for whichever thread took it. llama-110m
  // f16, every matrix at 16 rows, two threads, alternated rounds on a Zen 5: 290-313 -> 328-341
  // GFLOP/s, 8 rows 247-259 -> 275-283, 4 rows 106-148 -> 143-162 (guided chunks in between; for
  // prompts, 512 rows through the packed GEMM, one run per thread was no better).
  if (packed && !internal::IsInt8Type(w0.type) && m >= kDirectMinRows && m < kPackedMinRows && grain < total) {
    grain = (total + pool_.size() - 1) / pool_.size();
  }
  // Several fast decode rows of a quantized matrix take the fixed kernels' arithmetic. Fast and
  // fixed round the same activations to 8 bits, and a difference of one ulp upstream moves a
  // value across a rounding boundary now and then, so each matrix's own ulps would come back
  // multiplied to a whole quantization step: deterministic requests' candidates disagreed with
  // their replay on about one token in ten (llama-110m q8_0 and q4_0 at T = 0.8, against 1 in 500
  // for f16). With the fixed arithmetic a decode batch's rows are the replay's bits, and costs
  // nothing measurable from two rows on (two threads, decode at 8 requests: q8_0 582-712 against
  // 642-666 tok/s, q4_0 758-805 against 786-791); a lone row, where fast's own one-row kernel is
  // faster (batch-1 decode: q8_0 230-267 against 184-214 tok/s, q4_0 458-523 against 411-459),
  // keeps it. Prompt rows through weight panels (int8_gemm.h) keep fast's own definition, and on
  // AVX2 without VNNI the float GEMM (below). Without SIMD fast has no int8 kernels of its own:
  // its float row dots on the unrounded activations differ by the rounding itself.
  if (internal::IsInt8Type(w0.type) && fast_rows_.size() > 1) fast.int8 = fixed.int8;
  // fast rows of a quantized matrix, many of them (a prompt), on AVX2 alone: the packed float GEMM
  // on the weights' exact f32 values beats the AVX2 int8 kernels there (llama-110m on a Zen 3,
  // GEMMs alone at 512 rows: q8_0 62-85 -> 78-110 GFLOP/s, q4_0 60-77 -> 113-130), and their
  // activations need no quantizing. AVX-512 VNNI's int8 kernels stay (not measured against it).
  if (packed && !internal::CpuHasVnni512() && internal::IsInt8Type(w0.type) &&
      static_cast<int64_t>(fast_rows_.size()) >= kPackedMinRows) {
    fast.int8 = {};
  }
  // A family's rows of a quantized matrix on AVX-512 VNNI, from kFewRowsMin of them: whole-block
  // integer products in panels, the fixed definition's bits (fast's Int8Gemm its own), the
  // activation rows packed (Int8GemmFewRows) or, from kInt8GemmMinRows, the weight rows (Int8Gemm).
  // llama-110m, two threads, GEMMs alone at 512 rows on a Zen 5, alternated: q8_0 209-236 ->
  // 700-890 GFLOP/s, q4_0 239-291 -> 690-870 against version 2's row tiles; int8_gemm.h has the
  // split's measurements.
  auto panel_rows = [&](const Family& f) {
    return f.int8.one != nullptr && internal::Int8GemmAvailable(simd_) &&
           static_cast<int64_t>(f.rows.size()) >= internal::kFewRowsMin;
  };
  auto int8_gemm = [&](const Family& f) {
    return panel_rows(f) && static_cast<int64_t>(f.rows.size()) >= internal::kInt8GemmMinRows;
  };
  // Activation row i quantized at act_q8_[i * pairs] for the families that use int8 kernels.
  const int64_t pairs = internal::ActivationPairs(k);
  if ((fast.int8.one != nullptr && !fast_rows_.empty()) || (fixed.int8.one != nullptr && !fixed_rows_.empty())) {
    act_q8_.resize(static_cast<size_t>(m * pairs));
    for (int64_t i = 0; i < m; ++i) {
      if ((s[i] == Schedule::kFixed ? fixed : fast).int8.one != nullptr) {
        internal::QuantizeActivations(x + i * k, k, w0.type, act_q8_.data() + i * pairs, simd_);
      }
    }
  }
  if (panel_rows(fast) || panel_rows(fixed)) {
    act_bias_.resize(static_cast<size_t>(m * (k / 32)));
    for (const Family* f : {&fast, &fixed}) {
      if (!panel_rows(*f)) continue;
      for (int64_t i : f->rows) internal::Int8GemmBiases(act_q8_.data() + i * pairs, k, act_bias_.data() + i * (k / 32));
      if (int8_gemm(*f)) continue;
      AlignedVector<uint8_t>& panels = act_panels_[f == &fixed];
      panels.resize(static_cast<size_t>(internal::ActivationPanelBytes(static_cast<int64_t>(f->rows.size()), k)));
      internal::PackActivationPanels(act_q8_.data(), act_bias_.data(), k, f->rows.data(),
                                     static_cast<int64_t>(f->rows.size()), panels.data());
    }
  }
  // fast decode rows of Q4_K, Q5_K, Q6_K, IQ4_XS and MXFP4 on AVX-512 VNNI: integer sub-block
  // products against activations rounded to 8 bits per 256 values (kquant_gemv.h), each row
  // quantized once here for every matrix and thread.
  const bool kquant_gemv = !fast_rows_.empty() && static_cast<int64_t>(fast_rows_.size()) <= kKQuantGemvMaxRows &&
                           internal::KQuantGemvAvailable(w0.type, simd_);
  if (kquant_gemv) {
    act_k8_.resize(static_cast<size_t>(m * internal::Q8KRecords(k)));
    for (int64_t i : fast_rows_) internal::QuantizeQ8K(x + i * k, k, act_k8_.data() + i * internal::Q8KRecords(k));
  }
  if (bf16_dot) {
    act_bf16_.resize(static_cast<size_t>(m * internal::Bf16Pairs(k)));
    internal::RoundActivationsToBf16(x, k, fast_rows_.data(), static_cast<int64_t>(fast_rows_.size()),
                                     act_bf16_.data());
  }
  // Rows [r0, r1) of weight matrix w into y (w.rows per activation row).
  auto rows_of = [&](const WeightMatrix& w, float* y, int64_t r0, int64_t r1) {
    const int64_t n = w.rows;
    const float* xs[internal::kMaxRowDotX];
    float out[2 * internal::kMaxRowDotX];
    for (const Family* f : {&fast, &fixed}) {
      const auto count = static_cast<int64_t>(f->rows.size());
      if (count == 0) continue;
      if (f->int8.one != nullptr) {
        if (panel_rows(*f) && !int8_gemm(*f)) {
          internal::Int8GemmFewRows(w.type, w.data, w.row_bytes, r0, r1, act_panels_[f == &fixed].data(), k,
                                    f->rows.data(), count, y, n);
          continue;
        }
        if (int8_gemm(*f)) {
          AlignedVector<uint8_t>& panel = ThreadScratch<AlignedVector<uint8_t>, struct Int8GemmPanel>();
          const auto family = f == &fast ? internal::DotFamily::kFast : internal::DotFamily::kFixed;
          internal::Int8Gemm(family, w.type, w.data, w.row_bytes, r0, r1, act_q8_.data(), act_bias_.data(), k,
                             f->rows.data(), count, y, n, panel);
          continue;
        }
        Int8Rows(f->int8, w, r0, r1, f->rows.data(), count, y, n);
        continue;
      }
      if (f == &fast && kquant_gemv) {
        const internal::ActivationQ8K* acts[kKQuantGemvMaxRows];
        float* outs[kKQuantGemvMaxRows];
        for (int64_t j = 0; j < count; ++j) {
          const int64_t i = f->rows[static_cast<size_t>(j)];
          acts[j] = act_k8_.data() + i * internal::Q8KRecords(k);
          outs[j] = y + i * n + r0;
        }
        internal::KQuantGemv(w.type, w.row(r0), w.row_bytes, r1 - r0, acts, count, k, outs);
        continue;
      }
      if (f == &fast && bf16_dot) {
        AlignedVector<uint32_t>& panel = ThreadScratch<AlignedVector<uint32_t>, struct Bf16GemmPanel>();
        internal::Bf16Gemm(w.data, w.row_bytes, r0, r1, act_bf16_.data(), k, f->rows.data(), count, y, n, panel);
        continue;
      }
      if (packed && count >= kPackedMinRows) {
        AlignedVector<float>& panel = ThreadScratch<AlignedVector<float>, struct PackedGemmPanel>();
        if (f == &fast && blas &&
            internal::BlasGemm(w.type, w.data, w.row_bytes, r0, r1, x, k, f->rows.data(), count, y, n, panel)) {
          continue;
        }
        internal::PackedGemm(w.type, w.data, w.row_bytes, r0, r1, x, k, f->rows.data(), count, y, n, panel);
        continue;
      }
      if (packed && count >= kDirectMinRows) {
        internal::DirectGemm(w.type, w.data, w.row_bytes, r0, r1, x, k, f->rows.data(), count, y, n);
        continue;
      }
      for (int64_t t0 = 0; t0 < count; t0 += kXTile) {
        const int64_t t1 = std::min(count, t0 + kXTile);
        const bool gemv_rows = t1 - t0 < kGemvMaxRows;
        for (int64_t r = r0; r < r1;) {
          // Full groups of 4 activation rows: two weight rows at a time (both families); rows
          // in smaller groups (decode): the family's wide GEMV, else (fixed) four weight rows
          // at a time, over all their whole groups of weight rows in one call.
          const bool pair = tile != nullptr && r + 1 < r1 && !gemv_rows;
          const internal::WideGemv* gemv = nullptr;
          if (gemv_rows && f->wide.fn != nullptr && r + f->wide.rows <= r1) {
            gemv = &f->wide;
          } else if (gemv_rows && f == &fixed && gemv4.fn != nullptr && r + gemv4.rows <= r1) {
            gemv = &gemv4;
          }
          const int64_t step = gemv != nullptr ? (r1 - r) / gemv->rows * gemv->rows : pair ? 2 : 1;
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
            if (gemv != nullptr) {
              for (int j = 0; j < nb; ++j) {
                gemv->fn(w.row(r), w.row_bytes, step, xs[j], k, y + f->rows[static_cast<size_t>(b + j)] * n + r);
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
  };
  // One pass over the pool for all the matrices: a chunk of the concatenated rows may span two.
  auto chunk = [&](int64_t r0, int64_t r1) {
    int64_t base = 0;
    for (const MatMulOutput& o : outs) {
      const int64_t lo = std::max(r0, base), hi = std::min(r1, base + o.w->rows);
      if (lo < hi) rows_of(*o.w, o.y, lo - base, hi - base);
      base += o.w->rows;
    }
  };
  // Decode (GEMVs, a few microseconds per matrix): guided chunks in whole groups of the wide
  // GEMV's rows, so that the threads finish together.
  if (m < kGemvMaxRows && grain < total) {
    pool_.ParallelForGuided(total, kGuidedMinRows, internal::kWideGemvRows, chunk);
  } else {
    pool_.ParallelFor(total, grain, chunk);
  }
  return absl::OkStatus();
}

void CpuBackend::Int8Rows(const internal::Int8Kernels& kernels, const WeightMatrix& w, int64_t r0, int64_t r1,
                          const int64_t* rows, int64_t count, float* y, int64_t ldy) const {
  const int64_t k = w.cols, pairs = internal::ActivationPairs(k);
  auto act = [&](int64_t j) { return act_q8_.data() + rows[j] * pairs; };
  float out[64];
  const int tw = kernels.tile_w, tx = kernels.tile_x;
  // A tile of activation rows stays in cache: whole groups of tx rows.
  const int64_t x_tile = kernels.tile != nullptr ? std::max<int64_t>(tx, kXTile / tx * tx) : kXTile;
  for (int64_t t0 = 0; t0 < count; t0 += x_tile) {
    const int64_t t1 = std::min(count, t0 + x_tile);
    int64_t r = r0;
    // Whole tiles where the kernels have them: tw weight rows x tx activation rows.
    if (kernels.tile != nullptr && t1 - t0 >= tx) {
      for (; r + tw <= r1; r += tw) {
        const uint8_t* wr[8];
        for (int q = 0; q < tw; ++q) wr[q] = w.row(r + q);
        int64_t j = t0;
        for (; j + tx <= t1; j += tx) {
          const internal::ActivationPairQ8* xs[8];
          for (int q = 0; q < tx; ++q) xs[q] = act(j + q);
          kernels.tile(wr, xs, k, out);
          for (int a = 0; a < tw; ++a) {
            for (int q = 0; q < tx; ++q) y[rows[j + q] * ldy + r + a] = out[a * tx + q];
          }
        }
        for (; j < t1; ++j) {
          const internal::ActivationPairQ8* xj = act(j);
          for (int a = 0; a < tw; ++a) kernels.one(&wr[a], &xj, k, y + rows[j] * ldy + r + a);
        }
      }
    }
    if (kernels.gemv != nullptr && t1 - t0 < kGemvMaxRows) {
      for (int64_t j = t0; j < t1; ++j) {
        kernels.gemv(w.row(r), w.row_bytes, r1 - r, act(j), k, y + rows[j] * ldy + r);
      }
      continue;
    }
    for (; r < r1; ++r) {
      const uint8_t* wr = w.row(r);
      int64_t j = t0;
      for (; j + 4 <= t1; j += 4) {
        const internal::ActivationPairQ8* xs[4] = {act(j), act(j + 1), act(j + 2), act(j + 3)};
        kernels.cols4(&wr, xs, k, out);
        for (int q = 0; q < 4; ++q) y[rows[j + q] * ldy + r] = out[q];
      }
      for (; j < t1; ++j) {
        const internal::ActivationPairQ8* xj = act(j);
        kernels.one(&wr, &xj, k, y + rows[j] * ldy + r);
      }
    }
  }
}

void CpuBackend::ForRows(int64_t m, int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  // Rows on the pool when there is enough work to pay for the hand-off (a prompt), else here.
  pool_.ParallelFor(m, m * n < kMinParallelWork ? m : std::max<int64_t>(1, m / (pool_.size() * 4)), fn);
}

absl::Status CpuBackend::RmsNorm(const float* x, const float* weight, int64_t m, int64_t n,
                                 float eps, float* y, Schedules) {
  ForRows(m, n, [&](int64_t i0, int64_t i1) {
    std::vector<double>& sums = ThreadScratch<std::vector<double>, struct RmsNormSums>();
    sums.resize(static_cast<size_t>(i1 - i0));
    internal::SumSquares(x + i0 * n, n, i1 - i0, sums.data(), simd_);
    for (int64_t i = i0; i < i1; ++i) {
      const float* xi = x + i * n;
      float* yi = y + i * n;
      const double sum = sums[static_cast<size_t>(i - i0)];
      const float scale = 1.0f / std::sqrt(static_cast<float>(sum / static_cast<double>(n)) + eps);
      internal::ScaleByWeights(xi, scale, weight, n, yi, simd_);
    }
  });
  return absl::OkStatus();
}

absl::Status CpuBackend::AddBias(float* y, int64_t m, int64_t n, const float* bias) {
  ForRows(m, n, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      for (int64_t j = 0; j < n; ++j) y[i * n + j] += bias[j];
    }
  });
  return absl::OkStatus();
}

absl::Status CpuBackend::Add(float* y, const float* x, size_t n) {
  constexpr int64_t kRow = 1024;  // elements per work item
  const int64_t items = (static_cast<int64_t>(n) + kRow - 1) / kRow;
  ForRows(items, kRow, [&](int64_t i0, int64_t i1) {
    const auto j0 = static_cast<size_t>(i0 * kRow), j1 = std::min(n, static_cast<size_t>(i1 * kRow));
    internal::AddInPlace(y + j0, x + j0, static_cast<int64_t>(j1 - j0), simd_);
  });
  return absl::OkStatus();
}

absl::Status CpuBackend::Rope(float* x, int64_t n_heads, int64_t head_dim, const RopeParams& rope,
                              Schedules) {
  const auto m = static_cast<int64_t>(batch_.positions.size());
  const int32_t* positions = batch_.positions.data();
  const int64_t half = rope.n_rot / 2;
  const auto theta_scale = static_cast<float>(
      PortablePow(rope.freq_base, -2.0 / static_cast<double>(rope.n_rot)));
  // Pair p rotates elements (first(p), first(p) + stride).
  const int64_t stride = rope.neox ? half : 1;
  const int64_t step = rope.neox ? 1 : 2;
  // The rows' angles: once per step and set of parameters (every layer's queries and keys rotate
  // by the same ones; a model with local and global layers has two sets; BeginBatch drops them).
  RopeAngles* angles = nullptr;
  for (RopeAngles& a : rope_cs_) {
    if (a.params == rope && a.cs.size() == static_cast<size_t>(m * rope.n_rot)) angles = &a;
  }
  if (angles == nullptr) {
    angles = &rope_cs_.emplace_back();
    angles->params = rope;
    angles->cs.resize(static_cast<size_t>(m * rope.n_rot));
    float* all = angles->cs.data();
    ForRows(m, half * 64, [&](int64_t r0, int64_t r1) {  // (a pair's sine and cosine: ~64 multiply-adds)
      for (int64_t i = r0; i < r1; ++i) {
        float* cs = all + i * rope.n_rot;
        float theta = static_cast<float>(positions[i]) * rope.freq_scale;
        for (int64_t p = 0; p < half; ++p) {
          const float t = rope.freq_factors != nullptr ? theta / rope.freq_factors[p] : theta;
          double sin_t, cos_t;
          PortableSinCos(t, &sin_t, &cos_t);
          cs[2 * p] = static_cast<float>(cos_t);
          cs[2 * p + 1] = static_cast<float>(sin_t);
          if (rope.attn_factor != 1.0f) {
            cs[2 * p] *= rope.attn_factor;
            cs[2 * p + 1] *= rope.attn_factor;
          }
          theta *= theta_scale;
        }
      }
    });
  }
  const float* all_cs = angles->cs.data();
  ForRows(m, n_heads * head_dim, [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) {
      const float* cs = all_cs + i * rope.n_rot;
      for (int64_t h = 0; h < n_heads; ++h) {
        float* v = x + (i * n_heads + h) * head_dim;
        for (int64_t p = 0; p < half; ++p) {
          const float c = cs[2 * p], sn = cs[2 * p + 1];
          float* a = v + p * step;
          const float x0 = a[0], x1 = a[stride];
          a[0] = x0 * c - x1 * sn;
          a[stride] = x0 * sn + x1 * c;
        }
      }
    }
  });
  return absl::OkStatus();
}

absl::Status CpuBackend::ReadKvBlock(int32_t block, std::span<uint8_t> host) {
  LLM42_ASSIGN_OR_RETURN(size_t at, KvBlockOffset(kv_shape_, kv_element_bytes(), block, host.size()));
  std::memcpy(host.data(), kv_.data() + at, host.size());
  return absl::OkStatus();
}

absl::Status CpuBackend::WriteKvBlock(int32_t block, std::span<const uint8_t> host) {
  LLM42_ASSIGN_OR_RETURN(size_t at, KvBlockOffset(kv_shape_, kv_element_bytes(), block, host.size()));
  std::memcpy(kv_.data() + at, host.data(), host.size());
  return absl::OkStatus();
}

absl::Status CpuBackend::StoreKv(int64_t layer, const float* k, const float* v) {
  const int64_t kv = kv_shape_.width(layer), matrix = int64_t{kv_shape_.block_size} * kv;
  const auto elem = static_cast<int64_t>(kv_element_bytes());
  // Rounded to the storage type (round_row.h: the scalar conversions' bits on every CPU); the
  // row's values sit `matrix` elements after its keys.
  auto store = [&](const float* src, uint8_t* dst) {
    switch (kv_dtype_) {
      case KvDtype::kF16: internal::RoundRowToF16(src, kv, dst, simd_); break;
      case KvDtype::kBf16: internal::RoundRowToBf16(src, kv, dst, simd_); break;
      default: std::memcpy(dst, src, static_cast<size_t>(kv) * sizeof(float));
    }
  };
  for (size_t i = 0; i < batch_.positions.size(); ++i) {
    uint8_t* key = Key(layer, batch_.block_tables[i], batch_.positions[i]);
    store(k + i * static_cast<size_t>(kv), key);
    store(v + i * static_cast<size_t>(kv), key + matrix * elem);
  }
  return absl::OkStatus();
}

absl::Status CpuBackend::Attention(int64_t layer, const float* q, const AttentionShape& shape,
                                   float* out, Schedules s) {
  using internal::Partial;
  const internal::AttendRangeFn attend = internal::SelectAttendRange(kv_dtype_, simd_, shape.head_dim);
  const auto n_tokens = static_cast<int64_t>(batch_.positions.size());
  const int32_t* positions = batch_.positions.data();
  const int32_t* const* tables = batch_.block_tables.data();
  const int64_t width = kv_shape_.width(layer), matrix = int64_t{kv_shape_.block_size} * width;
  internal::KvLayerView kv;
  kv.elem = static_cast<int64_t>(kv_element_bytes());
  kv.base = kv_.data() + kv_layer_offsets_[static_cast<size_t>(layer)] * kv.elem;
  kv.block_stride = kv_block_elements_;
  kv.v_offset = matrix;
  kv.block_size = kv_shape_.block_size;
  kv.kv_dim = width;
  kv.softcap = shape.softcap;

  const int64_t hd = shape.head_dim, n_head = shape.n_head;
  const int64_t group = n_head / shape.n_head_kv;
  const float scale = shape.score_scale();
  // Bytes from a stored row's start to the keys (values) of query head h's KV head.
  auto off = [&](int64_t h) { return (h / group) * hd * kv.elem; };
  int64_t work = 0;
  for (int64_t i = 0; i < n_tokens; ++i) work += (positions[i] + 1 - shape.first_position(positions[i])) * n_head * hd;

  // Decode rows (a token alone in its sequence's run of the step) through the heads kernel; the
  // rest (prompts, verify windows) through the blocked kernels below.
  const internal::AttendHeadsFn heads = internal::SelectAttendHeads(kv_dtype_, simd_, hd);
  if (heads != nullptr) {
    AttendDecodeRows(heads, kv, q, shape, out);
    if (static_cast<int64_t>(decode_tokens_.size()) == n_tokens) return absl::OkStatus();
  }

  // Blocks of queries that share a KV head, a sequence and a schedule (a prompt's tokens, the
  // heads of a GQA group), run together where the CPU has the blocked kernel; each query's bits
  // are those of the one-query kernel (attention.h), so blocking changes no result.
  const internal::AttendBlockFn block = internal::SelectAttendBlock(kv_dtype_, simd_, hd);
  const int64_t per_block = block != nullptr ? internal::kMaxBlockQueries : 1;
  attention_queries_.clear();
  attention_blocks_.clear();
  for (int64_t i0 = 0; i0 < n_tokens;) {
    int64_t i1 = i0 + 1;
    while (i1 < n_tokens && tables[i1] == tables[i0] && s[i1] == s[i0]) ++i1;
    if (heads != nullptr && decode_row_[static_cast<size_t>(i0)] != 0) {  // done above
      i0 = i1;
      continue;
    }
    for (int64_t kvh = 0; kvh < shape.n_head_kv; ++kvh) {
      int64_t filled = per_block;
      for (int64_t i = i0; i < i1; ++i) {
        for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
          if (filled == per_block) {
            attention_blocks_.push_back(static_cast<int64_t>(attention_queries_.size()));
            filled = 0;
          }
          attention_queries_.push_back(i * n_head + h);
          ++filled;
        }
      }
    }
    i0 = i1;
  }
  const auto n_blocks = static_cast<int64_t>(attention_blocks_.size());
  attention_blocks_.push_back(static_cast<int64_t>(attention_queries_.size()));
  pool_.ParallelFor(n_blocks, work < kMinParallelWork ? n_blocks : 1, [&](int64_t b0, int64_t b1) {
    constexpr int kMax = internal::kMaxBlockQueries;
    std::vector<float>& scores = ThreadScratch<std::vector<float>, struct BlockAttentionScores>();
    std::vector<float>& chunk_out = ThreadScratch<std::vector<float>, struct BlockAttentionChunkOut>();
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t* items_b = attention_queries_.data() + attention_blocks_[static_cast<size_t>(b)];
      const int n = static_cast<int>(attention_blocks_[static_cast<size_t>(b) + 1] - attention_blocks_[static_cast<size_t>(b)]);
      const int64_t token = items_b[0] / n_head, head = items_b[0] % n_head;
      // Each query's positions [first, len): chunks of kAttentionChunk at multiples of it, the
      // one holding `first` starting there (a sliding window's), combined in order from it.
      int64_t len[kMax], first[kMax], longest_b = 0, earliest = INT64_MAX;
      bool started[kMax] = {};
      for (int j = 0; j < n; ++j) {
        len[j] = positions[items_b[j] / n_head] + 1;
        first[j] = shape.first_position(len[j] - 1);
        longest_b = std::max(longest_b, len[j]);
        earliest = std::min(earliest, first[j] / kAttentionChunk * kAttentionChunk);
      }
      scores.resize(static_cast<size_t>(kMax * std::min(kAttentionChunk, longest_b)));
      chunk_out.resize(static_cast<size_t>(kMax * hd));
      Partial total[kMax], part[kMax];
      for (int64_t begin = earliest; begin < longest_b; begin += kAttentionChunk) {
        // The queries whose positions reach into this chunk.
        const float* qa[kMax];
        float* sa[kMax];
        float* oa[kMax];
        int64_t end[kMax], from[kMax];
        int idx[kMax], a = 0;
        bool aligned = true;  // every query from the chunk's start (the blocked kernel's case)
        for (int j = 0; j < n; ++j) {
          if (len[j] <= begin || first[j] >= begin + kAttentionChunk) continue;
          idx[a] = j;
          qa[a] = q + items_b[j] * hd;
          end[a] = std::min(len[j], begin + kAttentionChunk);
          from[a] = std::max(begin, first[j]);
          aligned = aligned && from[a] == begin;
          sa[a] = scores.data() + a * std::min(kAttentionChunk, longest_b);
          oa[a] = !started[j] ? out + items_b[j] * hd : chunk_out.data() + a * hd;
          ++a;
        }
        if (block != nullptr && a > 2 && aligned) {
          block(qa, a, kv, tables[token], off(head), hd, scale, begin, end, sa, oa, part);
        } else {
          for (int x = 0; x < a; ++x) part[x] = attend(qa[x], kv, tables[token], off(head), hd, scale, from[x], end[x], sa[x], oa[x]);
        }
        for (int x = 0; x < a; ++x) {
          if (!started[idx[x]]) {
            total[idx[x]] = part[x];
            started[idx[x]] = true;
          } else {
            internal::Combine(total[idx[x]], out + items_b[idx[x]] * hd, part[x], oa[x], hd);
          }
        }
      }
      for (int j = 0; j < n; ++j) {
        const float* sink = shape.sinks != nullptr ? shape.sinks + items_b[j] % n_head : nullptr;
        internal::Normalize(total[j], sink, out + items_b[j] * hd, hd);
      }
    }
  });
  return absl::OkStatus();
}

void CpuBackend::AttendDecodeRows(internal::AttendHeadsFn heads, const internal::KvLayerView& kv, const float* q,
                                  const AttentionShape& shape, float* out) {
  if (decode_tokens_.empty()) return;
  const int64_t hd = shape.head_dim, n_head = shape.n_head, group = n_head / shape.n_head_kv, width = n_head * hd;
  const float scale = shape.score_scale();
  // A sliding window's layer: each token's chunks from the one holding its first position, that
  // one trimmed to it (the blocked path's chunks, so prefill and decode give the same bits).
  const std::vector<DecodeRange>* ranges = &decode_ranges_;
  const std::vector<int64_t>* firsts = &decode_first_;
  if (shape.window > 0 && shape.window != window_ranges_for_) {
    window_ranges_for_ = shape.window;
    window_ranges_.clear();
    window_first_.clear();
    for (size_t j = 0; j < decode_tokens_.size(); ++j) {
      window_first_.push_back(static_cast<int64_t>(window_ranges_.size()));
      for (int64_t r = decode_first_[j]; r < decode_first_[j + 1]; ++r) {
        DecodeRange range = decode_ranges_[static_cast<size_t>(r)];
        const int64_t first = shape.first_position(batch_.positions[static_cast<size_t>(range.token)]);
        if (range.end <= first) continue;
        range.begin = std::max(range.begin, first);
        window_ranges_.push_back(range);
      }
    }
    window_first_.push_back(static_cast<int64_t>(window_ranges_.size()));
  }
  if (shape.window > 0) {
    ranges = &window_ranges_;
    firsts = &window_first_;
  }
  // The work: the decode rows' chunks (BeginBatch; whole rows, on the pool); where there are
  // fewer chunks than threads, each chunk's KV heads in as many slices (half rows read at about
  // half the rate, but no thread idles).
  int64_t work = 0;
  for (const DecodeRange& r : *ranges) work += (r.end - r.begin) * width;
  const auto n_chunks = static_cast<int64_t>(ranges->size());
  const int64_t slices = n_chunks < pool_.size() ? std::min<int64_t>(shape.n_head_kv, pool_.size()) : 1;
  decode_parts_.resize(static_cast<size_t>(n_chunks * n_head));
  decode_out_.resize(static_cast<size_t>(n_chunks * width));
  pool_.ParallelFor(n_chunks * slices, work < kMinParallelWork ? n_chunks * slices : 1, [&](int64_t u0, int64_t u1) {
    std::vector<float>& scores = ThreadScratch<std::vector<float>, struct DecodeAttentionScores>();
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t r = u / slices, slice = u % slices;
      const DecodeRange& range = (*ranges)[static_cast<size_t>(r)];
      const int64_t h0 = shape.n_head_kv * slice / slices * group, h1 = shape.n_head_kv * (slice + 1) / slices * group;
      scores.resize(static_cast<size_t>((h1 - h0) * (range.end - range.begin)));
      // A token's first chunk writes its output in place; the others beside, to be combined.
      const bool first_chunk = r == 0 || (*ranges)[static_cast<size_t>(r) - 1].token != range.token;
      float* o = first_chunk ? out + range.token * width : decode_out_.data() + r * width;
      heads(q + range.token * width, h0, h1, group, kv, batch_.block_tables[static_cast<size_t>(range.token)], hd,
            scale, range.begin, range.end, scores.data(), o, decode_parts_.data() + r * n_head);
    }
  });
  for (size_t j = 0; j < decode_tokens_.size(); ++j) {
    float* o_token = out + decode_tokens_[j] * width;
    for (int64_t h = 0; h < n_head; ++h) {
      float* o = o_token + h * hd;
      internal::Partial total = decode_parts_[static_cast<size_t>((*firsts)[j] * n_head + h)];
      for (int64_t r = (*firsts)[j] + 1; r < (*firsts)[j + 1]; ++r) {
        internal::Combine(total, o, decode_parts_[static_cast<size_t>(r * n_head + h)],
                          decode_out_.data() + r * width + h * hd, hd);
      }
      internal::Normalize(total, shape.sinks != nullptr ? shape.sinks + h : nullptr, o, hd);
    }
  }
}

absl::Status CpuBackend::SwiGlu(const float* gate, const float* up, int64_t m, int64_t n,
                                float* out, Schedules) {
  // g / (1 + e^-g) * up, element by element; the exponentials a chunk at a time through
  // PortableExpfShifted (PortableExpf's bits). out may be gate or up.
  const int64_t total = m * n;
  constexpr int64_t kChunk = 256;
  ForRows((total + kChunk - 1) / kChunk, kChunk, [&](int64_t c0, int64_t c1) {
    float e[kChunk];
    for (int64_t i0 = c0 * kChunk; i0 < std::min(total, c1 * kChunk); i0 += kChunk) {
      const int64_t len = std::min(kChunk, total - i0);
      internal::Negate(gate + i0, len, e, simd_);
      PortableExpfShifted(e, 0.0f, e, len);  // e^(-g - 0) = e^-g, bit for bit
      internal::SwiGluFinish(gate + i0, up + i0, e, len, out + i0, simd_);
    }
  });
  return absl::OkStatus();
}

absl::Status CpuBackend::GeluGlu(const float* gate, const float* up, int64_t m, int64_t n, float* out) {
  // PortableGeluTanh per element (scalar: one arithmetic on every CPU). out may be gate or up.
  const int64_t total = m * n;
  ForRows(total, 32, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) out[i] = PortableGeluTanh(gate[i]) * up[i];
  });
  return absl::OkStatus();
}

absl::Status CpuBackend::Scale(float* x, size_t n, float s) {
  for (size_t i = 0; i < n; ++i) x[i] *= s;
  return absl::OkStatus();
}

absl::Status CpuBackend::SoftCap(float* x, size_t n, float cap) {
  ForRows(static_cast<int64_t>(n), 32, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) x[i] = PortableSoftCap(x[i], cap);
  });
  return absl::OkStatus();
}

absl::Status CpuBackend::Embed(const WeightMatrix& table, float* out) {
  for (size_t i = 0; i < batch_.tokens.size(); ++i) {
    internal::DequantizeRow(table.type, table.row(batch_.tokens[i]), table.cols,
                            out + static_cast<int64_t>(i) * table.cols);
  }
  return absl::OkStatus();
}

absl::Status CpuBackend::Columns(const float* x, int64_t m, int64_t stride, int64_t n, float* out) {
  if (n > stride) return absl::InvalidArgumentError(absl::StrCat("Columns: ", n, " columns of rows of ", stride));
  for (int64_t r = 0; r < m; ++r) std::copy_n(x + r * stride, n, out + r * n);
  return absl::OkStatus();
}

absl::Status CpuBackend::GatherRows(const float* x, int64_t n_cols, std::span<const int32_t> rows,
                                    float* out) {
  for (size_t r = 0; r < rows.size(); ++r) {
    std::copy_n(x + rows[r] * n_cols, n_cols, out + static_cast<int64_t>(r) * n_cols);
  }
  return absl::OkStatus();
}

absl::Status CpuBackend::ArgmaxRows(const float* x, int64_t n_cols, std::span<const int32_t> rows,
                                    ArgmaxSummary* host_out) {
  pool_.ParallelFor(static_cast<int64_t>(rows.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      host_out[r] = SummarizeArgmax({x + static_cast<int64_t>(rows[static_cast<size_t>(r)]) * n_cols,
                                     static_cast<size_t>(n_cols)});
    }
  });
  return absl::OkStatus();
}

absl::Status CpuBackend::DrawRows(const float* x, int64_t n_cols, std::span<const RowDraw> draws, DrawnRow* host_out) {
  LLM42_RETURN_IF_ERROR(CheckDraws(draws));
  pool_.ParallelFor(static_cast<int64_t>(draws.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const RowDraw& d = draws[static_cast<size_t>(r)];
      SerialGroup g;
      DrawRow(g, x + static_cast<int64_t>(d.row) * n_cols, n_cols, d.params, d.position, d.top_n, &host_out[r]);
    }
  });
  return absl::OkStatus();
}

absl::Status CpuBackend::ControlRows(float* x, int64_t n_cols, std::span<const RowControl> controls) {
  LLM42_RETURN_IF_ERROR(CheckControls(n_cols, controls));
  pool_.ParallelFor(static_cast<int64_t>(controls.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const RowControl& c = controls[static_cast<size_t>(r)];
      float* row = x + static_cast<int64_t>(c.row) * n_cols;
      ApplyEdits(c.edits.data(), static_cast<int64_t>(c.edits.size()), c.rule, row);
      if (!c.allowed.empty()) ApplyAllowed(c.allowed.data(), n_cols, row);
    }
  });
  return absl::OkStatus();
}

}  // namespace llm42
