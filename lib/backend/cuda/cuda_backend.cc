#include "lib/backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <string>
#include <string_view>
#include <tuple>
#include <thread>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "lib/backend/cpu/row_dot.h"
#include "lib/backend/cuda/control_rows.cuh"
#include "lib/backend/cuda/cuda_factory.h"
#include "lib/backend/cuda/cuda_status.h"
#include "lib/backend/cuda/draw_rows.cuh"
#include "lib/util/logging.h"
#include "lib/util/status.h"

namespace llm42 {
namespace cuda {
namespace {

Half HalfOf(GgmlType t) { return t == GgmlType::kF16 ? Half::kF16 : Half::kBf16; }
cudaDataType_t CudaTypeOf(GgmlType t) { return t == GgmlType::kF16 ? CUDA_R_16F : CUDA_R_16BF; }

}  // namespace

absl::Status CudaBackend::Init() {
  LLM42_CUDA_RETURN_IF_ERROR(cudaSetDevice(0));
  cudaDeviceProp prop{};
  LLM42_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, 0));
  device_blocks_ = int64_t{prop.multiProcessorCount} * kAttentionBlocksPerSm;
  // LLM42_CUDA_ATTENTION_SCRATCH_BYTES: a smaller room for split rows' partial states, so that
  // the device checks run batches in several waves.
  if (const char* env = std::getenv("LLM42_CUDA_ATTENTION_SCRATCH_BYTES"); env != nullptr && *env != '\0') {
    attention_scratch_bytes_ = std::max<int64_t>(1, std::strtoll(env, nullptr, 10));
  }
  if (const char* env = std::getenv("LLM42_CUDA_GRAPHS"); env != nullptr && std::string_view(env) == "0") {
    graphs_ = false;
  }
  if (absl::Status s = stream_.Create(); !s.ok()) return s;
  return gemm_.Init(stream_.get());
}

void CudaBackend::HostParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (host_pool_ == nullptr) {
    host_pool_ = std::make_unique<ThreadPool>(static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 16u)));
  }
  host_pool_->ParallelFor(n, 1, fn);
}

std::string CudaBackend::device_name() const {
  int device = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess) return "cuda";
  return prop.name;
}

absl::Status CudaBackend::NotWhileRecording(const char* what) const {
  if (!recording_) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(what, " inside a step being recorded (RunStep)"));
}

absl::Status CudaBackend::UploadInts(DeviceBuffer& b, std::span<const int32_t> host) {
  if (host.empty()) return absl::OkStatus();
  LLM42_RETURN_IF_ERROR(NotWhileRecording("a copy from the host"));
  if (absl::Status s = b.Grow(host.size_bytes()); !s.ok()) return s;
  // From pageable memory the copy is staged before the call returns, so `host` may change after.
  LLM42_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(b.get(), host.data(), host.size_bytes(), cudaMemcpyHostToDevice, stream_.get()));
  return absl::OkStatus();
}

absl::StatusOr<const void*> CudaBackend::HalfWeight(const WeightMatrix& host, std::vector<uint16_t>* converted,
                                                    GgmlType* type) {
  *type = host.type;
  if (host.type == GgmlType::kF16 || host.type == GgmlType::kBF16) return static_cast<const void*>(host.data);
  if (!logged_conversion_) {
    Log(LogLevel::kInfo, "cuda: ", GetGgmlTypeInfo(static_cast<uint32_t>(host.type))->name,
        " weights are converted to bf16 on the device (2 bytes per weight, ",
        absl::StrFormat("%.2f", 16.0 * static_cast<double>(host.cols) / static_cast<double>(host.row_bytes * 8)),
        "x the file's)");
    logged_conversion_ = true;
  }
  converted->resize(static_cast<size_t>(host.rows * host.cols));
  std::vector<float> row(static_cast<size_t>(host.cols));
  for (int64_t r = 0; r < host.rows; ++r) {
    if (!internal::DequantizeRow(host.type, host.row(r), host.cols, row.data())) {
      return absl::UnimplementedError(absl::StrCat("the CUDA backend cannot hold ",
                                                   GetGgmlTypeInfo(static_cast<uint32_t>(host.type))->name, " weights"));
    }
    for (int64_t c = 0; c < host.cols; ++c) {
      (*converted)[static_cast<size_t>(r * host.cols + c)] = Fp32ToBf16(row[static_cast<size_t>(c)]);
    }
  }
  *type = GgmlType::kBF16;
  return static_cast<const void*>(converted->data());
}

absl::StatusOr<WeightMatrix> CudaBackend::UploadWeight(const WeightMatrix& host) {
  const WeightMatrix* const alone = &host;
  LLM42_ASSIGN_OR_RETURN(std::vector<WeightMatrix> one, UploadWeights({&alone, 1}));
  return one[0];
}

absl::StatusOr<std::vector<WeightMatrix>> CudaBackend::UploadWeights(std::span<const WeightMatrix* const> hosts) {
  // One allocation, the matrices back to back in 16-bit rows: one matrix to MatMulShared when
  // they share a width and a type.
  size_t elements = 0;
  for (const WeightMatrix* h : hosts) elements += static_cast<size_t>(h->rows * h->cols);
  auto buf = DeviceBuffer::Allocate(std::max<size_t>(elements * 2, 2));
  if (!buf.ok()) return buf.status();
  std::vector<WeightMatrix> out;
  std::vector<uint16_t> converted;
  size_t at = 0;
  for (const WeightMatrix* h : hosts) {
    WeightMatrix w = *h;
    LLM42_ASSIGN_OR_RETURN(const void* src, HalfWeight(*h, &converted, &w.type));
    const size_t n = static_cast<size_t>(h->rows * h->cols);
    w.data = buf->as<uint8_t>() + at * 2;
    w.row_bytes = static_cast<size_t>(h->cols) * 2;
    LLM42_CUDA_RETURN_IF_ERROR(cudaMemcpy(const_cast<uint8_t*>(w.data), src, n * 2, cudaMemcpyHostToDevice));
    at += n;
    out.push_back(w);
  }
  bool one_matrix = out.size() > 1 && out.size() <= static_cast<size_t>(kMaxColumnParts);
  for (const WeightMatrix& w : out) one_matrix = one_matrix && w.cols == out[0].cols && w.type == out[0].type;
  if (one_matrix) {
    Together t;
    t.whole = out[0];
    t.whole.rows = static_cast<int64_t>(elements) / out[0].cols;
    for (const WeightMatrix& w : out) t.parts.push_back(w.rows);
    together_.emplace(out[0].data, std::move(t));
  }
  weights_.push_back(std::move(buf).value());
  return out;
}

absl::StatusOr<const float*> CudaBackend::UploadVector(std::span<const float> host) {
  auto buf = DeviceBuffer::Allocate(std::max<size_t>(host.size_bytes(), 4));
  if (!buf.ok()) return buf.status();
  LLM42_CUDA_RETURN_IF_ERROR(cudaMemcpy(buf->get(), host.data(), host.size_bytes(), cudaMemcpyHostToDevice));
  const float* p = buf->as<float>();
  weights_.push_back(std::move(buf).value());
  return p;
}

absl::StatusOr<float*> CudaBackend::Workspace(int slot, size_t n_floats) {
  if (slot < 0) return absl::InvalidArgumentError("negative workspace slot");
  if (workspace_.size() <= static_cast<size_t>(slot)) workspace_.resize(static_cast<size_t>(slot) + 1);
  DeviceBuffer& b = workspace_[static_cast<size_t>(slot)];
  if (b.bytes() < n_floats * sizeof(float)) {
    // A buffer may still be in use by queued work: wait before freeing it.
    if (absl::Status s = Synchronize(); !s.ok()) return s;
    if (absl::Status s = b.Grow(n_floats * sizeof(float)); !s.ok()) return s;
  }
  return b.as<float>();
}

absl::Status CudaBackend::AllocateKv(const KvShape& shape) {
  if (absl::Status s = Synchronize(); !s.ok()) return s;
  kv_ = DeviceBuffer();
  kv_shape_ = KvShape{};
  padding_block_ = -1;
  // One block more than the cache's: the one padding rows use (PaddingBlock), zeroed.
  const auto block_bytes = static_cast<size_t>(shape.block_elements()) * kv_element_bytes();
  auto buf = DeviceBuffer::Allocate(static_cast<size_t>(shape.n_blocks + 1) * block_bytes);
  if (!buf.ok()) return buf.status();
  kv_ = std::move(buf).value();
  LLM42_CUDA_RETURN_IF_ERROR(
      cudaMemset(static_cast<uint8_t*>(kv_.get()) + static_cast<size_t>(shape.n_blocks) * block_bytes, 0, block_bytes));
  kv_shape_ = shape;
  kv_layer_offsets_.clear();
  for (int64_t l = 0; l <= shape.n_layers; ++l) kv_layer_offsets_.push_back(shape.layer_offset(l));
  padding_block_ = static_cast<int32_t>(shape.n_blocks);
  return absl::OkStatus();
}

int64_t CudaBackend::available_memory_bytes() const {
  size_t free_bytes = 0, total = 0;
  if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) return 0;
  return static_cast<int64_t>(free_bytes);
}

absl::Status CudaBackend::CopyFromHost(float* dst, const float* host, size_t n) {
  LLM42_RETURN_IF_ERROR(NotWhileRecording("a copy from the host"));
  LLM42_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, host, n * sizeof(float), cudaMemcpyHostToDevice, stream_.get()));
  return Synchronize();
}

absl::Status CudaBackend::CopyToHost(float* host, const float* src, size_t n) {
  LLM42_RETURN_IF_ERROR(NotWhileRecording("a copy to the host"));
  LLM42_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host, src, n * sizeof(float), cudaMemcpyDeviceToHost, stream_.get()));
  return Synchronize();
}

absl::StatusOr<float*> CudaBackend::HostView(float* x, size_t n) {
  // (No copy into the old memory is still queued: CopyToHost waits for its copy.)
  if (absl::Status s = host_view_.Grow(n * sizeof(float)); !s.ok()) return s;
  if (absl::Status s = CopyToHost(host_view_.as<float>(), x, n); !s.ok()) return s;
  return host_view_.as<float>();
}

// Block-major like the CPU's: block b's bytes are contiguous (kernels.cu's KvAddr).
absl::Status CudaBackend::ReadKvBlock(int32_t block, std::span<uint8_t> host) {
  LLM42_RETURN_IF_ERROR(NotWhileRecording("a copy to the host"));
  LLM42_ASSIGN_OR_RETURN(size_t at, KvBlockOffset(kv_shape_, kv_element_bytes(), block, host.size()));
  LLM42_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host.data(), static_cast<const uint8_t*>(kv_.get()) + at, host.size(),
                                             cudaMemcpyDeviceToHost, stream_.get()));
  return Synchronize();
}

absl::Status CudaBackend::WriteKvBlock(int32_t block, std::span<const uint8_t> host) {
  LLM42_RETURN_IF_ERROR(NotWhileRecording("a copy from the host"));
  LLM42_ASSIGN_OR_RETURN(size_t at, KvBlockOffset(kv_shape_, kv_element_bytes(), block, host.size()));
  LLM42_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(static_cast<uint8_t*>(kv_.get()) + at, host.data(), host.size(),
                                             cudaMemcpyHostToDevice, stream_.get()));
  return Synchronize();
}

absl::Status CudaBackend::Synchronize() {
  LLM42_RETURN_IF_ERROR(NotWhileRecording("a wait for the device"));
  LLM42_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()));
  return absl::OkStatus();
}

absl::Status CudaBackend::BeginBatch(const BatchPlan& plan) {
  LLM42_RETURN_IF_ERROR(NotWhileRecording("a new batch"));
  batch_rows_ = static_cast<int64_t>(plan.positions.size());
  positions_host_.assign(plan.positions.begin(), plan.positions.end());
  sequences_host_.assign(plan.block_tables.begin(), plan.block_tables.end());
  sequences_host_.resize(plan.positions.size(), nullptr);
  for (ShapePlan& p : plans_) p.schedules.clear();
  LLM42_RETURN_IF_ERROR(UploadInts(tokens_, plan.tokens));
  LLM42_RETURN_IF_ERROR(UploadInts(positions_, plan.positions));
  max_blocks_ = 0;
  if (kv_shape_.block_size > 0 && !plan.block_tables.empty()) {
    // A power of two wide, so that steps of neighbouring lengths share a recording.
    int64_t used_most = 0;
    for (int32_t p : plan.positions) used_most = std::max<int64_t>(used_most, p / kv_shape_.block_size + 1);
    max_blocks_ = 1;
    while (max_blocks_ < used_most) max_blocks_ *= 2;
    tables_host_.assign(static_cast<size_t>(batch_rows_ * max_blocks_), 0);
    for (int64_t i = 0; i < batch_rows_; ++i) {
      const int64_t used = plan.positions[static_cast<size_t>(i)] / kv_shape_.block_size + 1;
      std::copy_n(plan.block_tables[static_cast<size_t>(i)], used, tables_host_.begin() + i * max_blocks_);
    }
    LLM42_RETURN_IF_ERROR(UploadInts(tables_, tables_host_));
  }
  // What the step's ops would otherwise upload: a mixed batch's row sets, the attention plans.
  const RowMix mix = SplitRows(batch_rows_, plan.schedules);
  if (mix == RowMix::kBoth) {
    for (auto [rows, idx, uploaded] : {std::tuple{&fast_rows_, &fast_idx_, &fast_uploaded_},
                                       std::tuple{&fixed_rows_, &fixed_idx_, &fixed_uploaded_}}) {
      uploaded->clear();
      LLM42_RETURN_IF_ERROR(UploadInts(*idx, *rows));
      *uploaded = *rows;
    }
  }
  if (kv_shape_.block_size > 0) {
    for (ShapePlan& p : plans_) LLM42_RETURN_IF_ERROR(Plan(p, plan.schedules));
  }
  // The step's key: its rows, how many are fixed (the row sets themselves are device data, so
  // steps whose fixed rows sit elsewhere share a recording), its table width, each plan's
  // shape, waves and tiles; the owner last (RunStep).
  const int64_t fixed = mix == RowMix::kBoth ? static_cast<int64_t>(fixed_rows_.size())
                       : mix == RowMix::kFixed ? batch_rows_
                                               : 0;
  step_key_.assign({batch_rows_, fixed, max_blocks_});
  for (const ShapePlan& p : plans_) {
    step_key_.insert(step_key_.end(), {p.n_head, p.head_dim, p.window, static_cast<int64_t>(p.splits.tiles.size())});
    step_key_.insert(step_key_.end(), p.splits.waves.begin(), p.splits.waves.end());
  }
  step_key_.push_back(0);
  return absl::OkStatus();
}

KvArgs CudaBackend::Kv(int64_t layer) const {
  const auto offset = static_cast<size_t>(kv_layer_offsets_[static_cast<size_t>(layer)]) * kv_element_bytes();
  return KvArgs{static_cast<uint8_t*>(kv_.get()) + offset, kv_layer_offsets_.back(),
                kv_shape_.block_size, kv_shape_.width(layer), tables_.as<int32_t>(), max_blocks_};
}

absl::Status CudaBackend::Embed(const WeightMatrix& table, float* out) {
  LLM42_CUDA_RETURN_IF_ERROR(
      LaunchEmbed(table.data, HalfOf(table.type), table.cols, tokens_.as<int32_t>(), batch_rows_, out, stream_.get()));
  return absl::OkStatus();
}

absl::Status CudaBackend::RmsNorm(const float* x, const float* weight, int64_t m, int64_t n, float eps, float* y,
                                  Schedules) {
  LLM42_CUDA_RETURN_IF_ERROR(LaunchRmsNorm(x, weight, m, n, eps, y, stream_.get()));
  return absl::OkStatus();
}

absl::Status CudaBackend::AddRmsNorm(float* x, const float* add, const float* weight, int64_t m, int64_t n, float eps,
                                     float* y, Schedules) {
  LLM42_CUDA_RETURN_IF_ERROR(LaunchAddRmsNorm(x, add, weight, m, n, eps, y, stream_.get()));
  return absl::OkStatus();
}

absl::Status CudaBackend::Gemm(const float* x, int64_t m, const WeightMatrix& w, float* y, bool fixed) {
  const LtGemm::Output out{w.data, w.rows, y};
  return gemm_.Run(x, m, w.cols, CudaTypeOf(w.type), {&out, 1}, fixed);
}

CudaBackend::RowMix CudaBackend::SplitRows(int64_t m, Schedules s) {
  fast_rows_.clear();
  fixed_rows_.clear();
  bool fast = false, fixed = false;
  for (int64_t i = 0; i < (s.uniform() ? std::min<int64_t>(m, 1) : m); ++i) (s[i] == Schedule::kFixed ? fixed : fast) = true;
  if (!(fast && fixed)) return fixed ? RowMix::kFixed : RowMix::kFast;
  for (int64_t i = 0; i < m; ++i) (s[i] == Schedule::kFixed ? fixed_rows_ : fast_rows_).push_back(static_cast<int32_t>(i));
  return RowMix::kBoth;
}

const CudaBackend::Together* CudaBackend::TogetherOf(std::span<const MatMulOutput> outs) const {
  if (outs.empty()) return nullptr;
  auto it = together_.find(outs[0].w->data);
  if (it == together_.end() || it->second.parts.size() != outs.size()) return nullptr;
  const uint8_t* at = outs[0].w->data;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (outs[i].w->data != at || outs[i].w->rows != it->second.parts[i]) return nullptr;
    at += static_cast<size_t>(outs[i].w->rows) * outs[i].w->row_bytes;
  }
  return &it->second;
}

absl::Status CudaBackend::MatMulShared(const float* x, int64_t m, std::span<const MatMulOutput> outs, Schedules s) {
  LLM42_RETURN_IF_ERROR(SameWidth(outs));
  if (const Together* t = TogetherOf(outs); t != nullptr) {
    // Uploaded together: one matrix (every batch's fixed rows alike), its columns then split.
    LLM42_RETURN_IF_ERROR(together_y_.Grow(static_cast<size_t>(m * t->whole.rows) * sizeof(float)));
    LLM42_RETURN_IF_ERROR(MatMul(x, m, t->whole, together_y_.as<float>(), s));
    ColumnParts parts;
    parts.count = static_cast<int>(outs.size());
    for (size_t i = 0; i < outs.size(); ++i) {
      parts.y[i] = outs[i].y;
      parts.first[i + 1] = parts.first[i] + outs[i].w->rows;
    }
    LLM42_CUDA_RETURN_IF_ERROR(LaunchSplitColumns(together_y_.as<float>(), m, parts, stream_.get()));
    return absl::OkStatus();
  }
  const RowMix mix = SplitRows(m, s);
  bool one_type = true;
  for (const MatMulOutput& o : outs) one_type = one_type && o.w->type == outs[0].w->type;
  // Rows of both schedules, or weights of two 16-bit types: each matrix as MatMul runs it.
  if (outs.empty() || !one_type || mix == RowMix::kBoth) return Backend::MatMulShared(x, m, outs, s);
  absl::InlinedVector<LtGemm::Output, 4> targets;
  for (const MatMulOutput& o : outs) targets.push_back(LtGemm::Output{o.w->data, o.w->rows, o.y});
  return gemm_.Run(x, m, outs[0].w->cols, CudaTypeOf(outs[0].w->type), targets, mix == RowMix::kFixed);
}

absl::Status CudaBackend::MatMul(const float* x, int64_t m, const WeightMatrix& w, float* y, Schedules s) {
  const RowMix mix = SplitRows(m, s);
  if (mix != RowMix::kBoth) return Gemm(x, m, w, y, mix == RowMix::kFixed);
  // Mixed: each schedule's rows gathered, multiplied, and scattered back. A step's matrices
  // share its row sets: on the device once for all of them.
  for (auto [rows, idx, uploaded] : {std::tuple{&fast_rows_, &fast_idx_, &fast_uploaded_},
                                     std::tuple{&fixed_rows_, &fixed_idx_, &fixed_uploaded_}}) {
    const auto n_rows = static_cast<int64_t>(rows->size());
    if (*uploaded != *rows) {
      uploaded->clear();  // until the upload succeeds
      LLM42_RETURN_IF_ERROR(UploadInts(*idx, *rows));
      *uploaded = *rows;
    }
    const int32_t* row_ids = idx->as<int32_t>();
    if (absl::Status st = gathered_x_.Grow(static_cast<size_t>(n_rows * w.cols) * sizeof(float)); !st.ok()) return st;
    if (absl::Status st = gathered_y_.Grow(static_cast<size_t>(n_rows * w.rows) * sizeof(float)); !st.ok()) return st;
    LLM42_CUDA_RETURN_IF_ERROR(
        LaunchGatherRows(x, w.cols, row_ids, n_rows, gathered_x_.as<float>(), stream_.get()));
    if (absl::Status st = Gemm(gathered_x_.as<float>(), n_rows, w, gathered_y_.as<float>(), rows == &fixed_rows_);
        !st.ok()) {
      return st;
    }
    LLM42_CUDA_RETURN_IF_ERROR(
        LaunchScatterRows(gathered_y_.as<float>(), w.rows, row_ids, n_rows, y, stream_.get()));
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::AddBias(float* y, int64_t m, int64_t n, const float* bias) {
  LLM42_CUDA_RETURN_IF_ERROR(LaunchAddBias(y, m, n, bias, stream_.get()));
  return absl::OkStatus();
}

absl::Status CudaBackend::Add(float* y, const float* x, size_t n) {
  LLM42_CUDA_RETURN_IF_ERROR(LaunchAdd(y, x, n, stream_.get()));
  return absl::OkStatus();
}

namespace {

RopeArgs RopeArgsOf(const RopeParams& rope) {
  return RopeArgs{rope.n_rot, rope.freq_base, rope.freq_scale, rope.neox, rope.freq_factors, rope.attn_factor};
}

}  // namespace

absl::Status CudaBackend::Rope(float* x, int64_t n_heads, int64_t head_dim, const RopeParams& rope, Schedules) {
  const RopeArgs args = RopeArgsOf(rope);
  LLM42_CUDA_RETURN_IF_ERROR(
      LaunchRope(x, batch_rows_, n_heads, head_dim, args, positions_.as<int32_t>(), stream_.get()));
  return absl::OkStatus();
}

absl::Status CudaBackend::RopeStoreKv(int64_t layer, float* q, float* k, const float* v, const AttentionShape& shape,
                                      const RopeParams& rope, Schedules) {
  if (kv_.get() == nullptr) return absl::FailedPreconditionError("no KV storage was allocated");
  LLM42_CUDA_RETURN_IF_ERROR(LaunchRopeStoreKv(Kv(layer), q, k, v, shape.n_head, shape.n_head_kv, shape.head_dim,
                                               RopeArgsOf(rope), positions_.as<int32_t>(), batch_rows_,
                                               stream_.get()));
  return absl::OkStatus();
}

absl::Status CudaBackend::StoreKv(int64_t layer, const float* k, const float* v) {
  if (kv_.get() == nullptr) return absl::FailedPreconditionError("no KV storage was allocated");
  LLM42_CUDA_RETURN_IF_ERROR(LaunchStoreKv(Kv(layer), k, v, positions_.as<int32_t>(), batch_rows_, stream_.get()));
  return absl::OkStatus();
}

absl::Status CudaBackend::Plan(ShapePlan& p, Schedules s) {
  p.schedules.clear();  // until it is uploaded
  schedules_scratch_.resize(static_cast<size_t>(batch_rows_));
  for (int64_t i = 0; i < batch_rows_; ++i) schedules_scratch_[static_cast<size_t>(i)] = s[i];
  const int64_t slot_bytes = p.n_head * (p.head_dim + 2) * static_cast<int64_t>(sizeof(float));
  p.splits = PlanAttentionSplits(positions_host_, sequences_host_, Schedules(schedules_scratch_.data()), p.window,
                                 p.n_head, device_blocks_, attention_scratch_bytes_ / slot_bytes);
  if (p.splits.max_spans > 1 || !p.splits.tiles.empty()) LLM42_RETURN_IF_ERROR(UploadInts(p.rows, p.splits.rows));
  if (!p.splits.tiles.empty()) LLM42_RETURN_IF_ERROR(UploadInts(p.tiles, p.splits.tiles));
  int64_t slots = 0;
  for (size_t w = 0; w < p.splits.waves.size(); w += 3) {
    if (p.splits.waves[w + 2] > 1) {
      slots = std::max<int64_t>(slots, int64_t{p.splits.waves[w + 1]} * p.splits.waves[w + 2]);
    }
  }
  if (span_partial_.bytes() < static_cast<size_t>(slots * slot_bytes)) {
    LLM42_RETURN_IF_ERROR(NotWhileRecording("growing attention's scratch"));
    LLM42_RETURN_IF_ERROR(span_partial_.Grow(static_cast<size_t>(slots * slot_bytes)));
  }
  p.schedules = schedules_scratch_;
  return absl::OkStatus();
}

absl::StatusOr<const CudaBackend::ShapePlan*> CudaBackend::PlanFor(const AttentionShape& shape, Schedules s) {
  ShapePlan* p = nullptr;
  for (ShapePlan& q : plans_) {
    if (q.n_head == shape.n_head && q.head_dim == shape.head_dim && q.window == shape.window) p = &q;
  }
  if (p == nullptr) {
    p = &plans_.emplace_back();
    p->n_head = shape.n_head;
    p->head_dim = shape.head_dim;
    p->window = shape.window;
  }
  bool planned = p->schedules.size() == static_cast<size_t>(batch_rows_);
  for (int64_t i = 0; planned && i < batch_rows_; ++i) planned = p->schedules[static_cast<size_t>(i)] == s[i];
  if (!planned) LLM42_RETURN_IF_ERROR(Plan(*p, s));
  return p;
}

absl::Status CudaBackend::Attention(int64_t layer, const float* q, const AttentionShape& shape, float* out,
                                    Schedules s) {
  if (kv_.get() == nullptr) return absl::FailedPreconditionError("no KV storage was allocated");
  if (shape.sinks != nullptr) return absl::UnimplementedError("attention sinks are not implemented on CUDA");
  LLM42_ASSIGN_OR_RETURN(const ShapePlan* p, PlanFor(shape, s));
  const AttentionSplits& splits = p->splits;
  const bool planned = splits.max_spans > 1 || !splits.tiles.empty();
  // Wave by wave (one, unless split rows' partial states outgrow their room); the tiles with the
  // first.
  for (size_t w = 0; w < splits.waves.size(); w += 3) {
    AttentionSpans spans;
    if (planned) {
      spans.rows = p->rows.as<int32_t>();
      spans.first_row = splits.waves[w];
      spans.wave_rows = splits.waves[w + 1];
      spans.max_spans = splits.waves[w + 2];
      if (spans.max_spans > 1) spans.partial = span_partial_.as<float>();
      if (w == 0 && !splits.tiles.empty()) {
        spans.tiles = p->tiles.as<int32_t>();
        spans.n_tiles = static_cast<int32_t>(splits.tiles.size() / 2);
      }
    }
    LLM42_CUDA_RETURN_IF_ERROR(LaunchAttention(Kv(layer), q, positions_.as<int32_t>(), batch_rows_, shape.n_head,
                                               shape.n_head_kv, shape.head_dim,
                                               AttentionArgs{shape.score_scale(), shape.softcap, shape.window},
                                               spans, out, stream_.get()));
  }
  return absl::OkStatus();
}

cudaGraphExec_t CudaBackend::Record(const std::function<absl::Status()>& ops) {
  if (cudaStreamBeginCapture(stream_.get(), cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  recording_ = true;
  absl::Status st = ops();
  cudaGraph_t graph = nullptr;
  cudaError_t e = cudaStreamEndCapture(stream_.get(), &graph);
  recording_ = false;
  cudaGraphExec_t exec = nullptr;
  if (st.ok() && e == cudaSuccess && graph != nullptr) e = cudaGraphInstantiate(&exec, graph, 0);
  if (graph != nullptr) cudaGraphDestroy(graph);
  if (st.ok() && e == cudaSuccess && exec != nullptr) return exec;
  (void)cudaGetLastError();  // a capture's errors are not sticky: clear the last one
  if (exec != nullptr) cudaGraphExecDestroy(exec);
  if (!logged_refusal_) {
    logged_refusal_ = true;
    Log(LogLevel::kWarning, "cuda: a step could not be recorded as a graph and runs as it is (so do the others ",
        "like it): ", st.ok() ? std::string(cudaGetErrorString(e)) : st.ToString());
  }
  return nullptr;
}

absl::Status CudaBackend::RunStep(const void* owner, const std::function<absl::Status()>& ops) {
  if (!graphs_ || batch_rows_ > kMaxRecordedRows || step_key_.empty()) return ops();
  step_key_.back() = static_cast<int64_t>(reinterpret_cast<intptr_t>(owner));
  void* graph = nullptr;
  switch (recordings_.Next(step_key_, DeviceAllocationChanges().load(), &graph)) {
    case StepRecordings::Action::kRun:
      return ops();
    case StepRecordings::Action::kReplay:
      LLM42_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), stream_.get()));
      return absl::OkStatus();
    case StepRecordings::Action::kRecord:
      break;
  }
  cudaGraphExec_t exec = Record(ops);
  if (exec == nullptr) {
    // Nothing of the recording ran. Every upload it tried was refused before the host marked it
    // done (Plan, MatMul's row sets), so what the host believes is on the device still is.
    recordings_.Refused(step_key_);
    return ops();
  }
  if (!recordings_.Recorded(step_key_, exec, DeviceAllocationChanges().load())) return ops();
  LLM42_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(exec, stream_.get()));
  return absl::OkStatus();
}

int64_t CudaBackend::StepRows(int64_t m) const {
  return graphs_ && padding_block_ >= 0 ? StepRowBucket(m, kMaxRecordedRows) : m;
}

int32_t CudaBackend::PaddingBlock() const { return graphs_ ? padding_block_ : -1; }

absl::Status CudaBackend::GeluGlu(const float* gate, const float* up, int64_t m, int64_t n, float* out) {
  LLM42_CUDA_RETURN_IF_ERROR(LaunchGeluGlu(gate, up, static_cast<size_t>(m * n), out, stream_.get()));
  return absl::OkStatus();
}

absl::Status CudaBackend::Scale(float* x, size_t n, float s) {
  LLM42_CUDA_RETURN_IF_ERROR(LaunchScale(x, n, s, stream_.get()));
  return absl::OkStatus();
}

absl::Status CudaBackend::SoftCap(float* x, size_t n, float cap) {
  LLM42_CUDA_RETURN_IF_ERROR(LaunchSoftCap(x, n, cap, stream_.get()));
  return absl::OkStatus();
}

absl::Status CudaBackend::SwiGlu(const float* gate, const float* up, int64_t m, int64_t n, float* out, Schedules) {
  LLM42_CUDA_RETURN_IF_ERROR(LaunchSwiGlu(gate, up, static_cast<size_t>(m * n), out, stream_.get()));
  return absl::OkStatus();
}

absl::Status CudaBackend::ArgmaxRows(const float* x, int64_t n_cols, std::span<const int32_t> rows,
                                     ArgmaxSummary* host_out) {
  static_assert(sizeof(ArgmaxOut) == sizeof(ArgmaxSummary) && offsetof(ArgmaxOut, id) == offsetof(ArgmaxSummary, id) &&
                offsetof(ArgmaxOut, best) == offsetof(ArgmaxSummary, best) &&
                offsetof(ArgmaxOut, second) == offsetof(ArgmaxSummary, second));
  if (rows.empty()) return absl::OkStatus();
  if (absl::Status s = UploadInts(argmax_rows_, rows); !s.ok()) return s;
  if (absl::Status s = argmax_out_.Grow(rows.size() * sizeof(ArgmaxOut)); !s.ok()) return s;
  LLM42_CUDA_RETURN_IF_ERROR(LaunchArgmaxRows(x, n_cols, argmax_rows_.as<int32_t>(), static_cast<int64_t>(rows.size()),
                                              argmax_out_.as<ArgmaxOut>(), stream_.get()));
  LLM42_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_out, argmax_out_.get(), rows.size() * sizeof(ArgmaxOut),
                                             cudaMemcpyDeviceToHost, stream_.get()));
  return Synchronize();
}

absl::Status CudaBackend::DrawRows(const float* x, int64_t n_cols, std::span<const RowDraw> draws,
                                   DrawnRow* host_out) {
  LLM42_RETURN_IF_ERROR(CheckDraws(draws));
  if (draws.empty()) return absl::OkStatus();
  if (absl::Status s = draw_in_.Grow(draws.size_bytes()); !s.ok()) return s;
  if (absl::Status s = draw_out_.Grow(draws.size() * sizeof(DrawnRow)); !s.ok()) return s;
  LLM42_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(draw_in_.get(), draws.data(), draws.size_bytes(), cudaMemcpyHostToDevice, stream_.get()));
  LLM42_CUDA_RETURN_IF_ERROR(LaunchDrawRows(x, n_cols, draw_in_.as<RowDraw>(), static_cast<int64_t>(draws.size()),
                                            draw_out_.as<DrawnRow>(), stream_.get()));
  LLM42_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_out, draw_out_.get(), draws.size() * sizeof(DrawnRow),
                                             cudaMemcpyDeviceToHost, stream_.get()));
  return Synchronize();
}

absl::Status CudaBackend::ControlRows(float* x, int64_t n_cols, std::span<const RowControl> controls) {
  LLM42_RETURN_IF_ERROR(CheckControls(n_cols, controls));
  if (controls.empty()) return absl::OkStatus();
  // [DeviceRowControl per control][every edit][every mask word], each part 8-byte aligned.
  size_t n_edits = 0, n_words = 0;
  for (const RowControl& c : controls) {
    n_edits += c.edits.size();
    n_words += c.allowed.size();
  }
  const size_t edits_at = controls.size() * sizeof(DeviceRowControl);
  const size_t words_at = (edits_at + n_edits * sizeof(LogitEdit) + 7) / 8 * 8;
  control_host_.resize(words_at + n_words * sizeof(uint64_t));
  auto* heads = reinterpret_cast<DeviceRowControl*>(control_host_.data());
  auto* edits = reinterpret_cast<LogitEdit*>(control_host_.data() + edits_at);
  auto* words = reinterpret_cast<uint64_t*>(control_host_.data() + words_at);
  size_t e = 0, w = 0;
  for (size_t i = 0; i < controls.size(); ++i) {
    const RowControl& c = controls[i];
    heads[i] = DeviceRowControl{c.row, static_cast<int32_t>(c.edits.size()), static_cast<int64_t>(e),
                                c.allowed.empty() ? -1 : static_cast<int64_t>(w), c.rule};
    std::copy(c.edits.begin(), c.edits.end(), edits + e);
    std::copy(c.allowed.begin(), c.allowed.end(), words + w);
    e += c.edits.size();
    w += c.allowed.size();
  }
  if (absl::Status st = control_in_.Grow(control_host_.size()); !st.ok()) return st;
  // From pageable memory: the call returns once the bytes are staged, so the next call may refill it.
  LLM42_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(control_in_.get(), control_host_.data(), control_host_.size(),
                                             cudaMemcpyHostToDevice, stream_.get()));
  const auto* base = static_cast<const uint8_t*>(control_in_.get());
  LLM42_CUDA_RETURN_IF_ERROR(LaunchControlRows(x, n_cols, reinterpret_cast<const DeviceRowControl*>(base),
                                               static_cast<int64_t>(controls.size()),
                                               reinterpret_cast<const LogitEdit*>(base + edits_at),
                                               reinterpret_cast<const uint64_t*>(base + words_at), stream_.get()));
  return absl::OkStatus();
}

absl::Status CudaBackend::Columns(const float* x, int64_t m, int64_t stride, int64_t n, float* out) {
  LLM42_CUDA_RETURN_IF_ERROR(LaunchColumns(x, m, stride, n, out, stream_.get()));
  return absl::OkStatus();
}

absl::Status CudaBackend::GatherRows(const float* x, int64_t n_cols, std::span<const int32_t> rows, float* out) {
  if (absl::Status s = UploadInts(rows_idx_, rows); !s.ok()) return s;
  LLM42_CUDA_RETURN_IF_ERROR(LaunchGatherRows(x, n_cols, rows_idx_.as<int32_t>(), static_cast<int64_t>(rows.size()),
                                              out, stream_.get()));
  return absl::OkStatus();
}

}  // namespace cuda

absl::Status CudaUsable() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e == cudaErrorInsufficientDriver) {
    return absl::UnimplementedError("no NVIDIA driver, or one older than this build's CUDA 13 needs");
  }
  if (e == cudaErrorNoDevice || (e == cudaSuccess && n == 0)) return absl::UnimplementedError("no CUDA device");
  if (e != cudaSuccess) return cuda::FromCuda(e, "cudaGetDeviceCount");
  cudaDeviceProp prop{};
  if (absl::Status s = cuda::FromCuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties"); !s.ok()) return s;
  if (prop.major < 8) {
    return absl::UnimplementedError(absl::StrCat(prop.name, " has compute capability ", prop.major, ".", prop.minor,
                                                 "; llm42's CUDA backend needs 8.0 (Ampere) or newer"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const BackendOptions& options) {
  if (options.kv_dtype != KvDtype::kAuto && options.kv_dtype != KvDtype::kBf16) {
    return absl::UnimplementedError(absl::StrCat("the CUDA backend stores the KV cache in bf16, not ",
                                                 KvDtypeName(options.kv_dtype)));
  }
  auto be = std::make_unique<cuda::CudaBackend>();
  if (absl::Status s = be->Init(); !s.ok()) return s;
  return std::unique_ptr<Backend>(std::move(be));
}

}  // namespace llm42
