#include "lib/backend/cuda/lt_gemm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/container/node_hash_map.h"
#include "absl/strings/str_cat.h"
#include "lib/backend/cuda/cuda_status.h"
#include "lib/backend/cuda/kernels.cuh"
#include "lib/util/ggml_types.h"
#include "lib/util/logging.h"
#include "lib/util/mutex.h"
#include "lib/util/status.h"

namespace llm42::cuda {
namespace {

// How many of the heuristic's algorithms a row count's candidates are.
constexpr int kCandidates = 8;

Half HalfOf(cudaDataType_t t) { return t == CUDA_R_16F ? Half::kF16 : Half::kBf16; }

FixedGemmKind OwnKind(GemmWay::Kind kind) {
  return kind == GemmWay::Kind::kTensorCore ? FixedGemmKind::kTensorCore : FixedGemmKind::kFmaChain;
}

}  // namespace

// ChooseFixedGemm's device: one weight's GEMMs over the check input (its 256 rows repeated up to
// max_rows), cuBLASLt's algorithms in the shape's table (`algos`, which GemmWay ids index).
class LtGemm::CheckDevice final : public FixedGemmDevice {
 public:
  CheckDevice(LtGemm& lt, const void* w, int64_t n, int64_t k, cudaDataType_t type, int64_t max_rows,
              std::vector<cublasLtMatmulAlgo_t>& algos)
      : lt_(lt), w_(w), n_(n), k_(k), type_(type), max_rows_(max_rows), algos_(algos) {}

  absl::Status Init() {
    const std::vector<float> input = FixedGemmCheckInput(k_);
    const int64_t first = std::min(kFixedGemmCheckRows, max_rows_);
    std::vector<uint16_t> half(static_cast<size_t>(first * k_));
    for (size_t i = 0; i < half.size(); ++i) half[i] = type_ == CUDA_R_16F ? Fp32ToFp16(input[i]) : Fp32ToBf16(input[i]);
    LLM42_RETURN_IF_ERROR(x_.Grow(static_cast<size_t>(max_rows_ * k_) * 2));
    LLM42_RETURN_IF_ERROR(y_.Grow(static_cast<size_t>(max_rows_ * n_) * sizeof(float)));
    auto* x = x_.as<uint8_t>();
    LLM42_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(x, half.data(), half.size() * 2, cudaMemcpyHostToDevice, lt_.stream_));
    // Row r holds check row r % kFixedGemmCheckRows: the rows so far, copied after themselves.
    for (int64_t have = first; have < max_rows_; have *= 2) {
      const int64_t more = std::min(have, max_rows_ - have);
      LLM42_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(x + have * k_ * 2, x, static_cast<size_t>(more * k_) * 2,
                                                 cudaMemcpyDeviceToDevice, lt_.stream_));
    }
    LLM42_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(lt_.stream_));
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<int>> LibraryCandidates(int64_t m) override {
    Plan probe;
    LLM42_RETURN_IF_ERROR(lt_.Describe(Key{m, n_, k_, static_cast<int>(type_), true}, probe));
    cublasLtMatmulPreference_t pref = nullptr;
    LLM42_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t no_workspace = 0;
    cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
    int found = 0;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                             &no_workspace, sizeof no_workspace);
    if (st == CUBLAS_STATUS_SUCCESS) {
      st = cublasLtMatmulAlgoGetHeuristic(lt_.handle_, probe.desc, probe.a, probe.b, probe.c, probe.c, pref,
                                          kCandidates, results, &found);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    if (st == CUBLAS_STATUS_NOT_SUPPORTED) found = 0;
    if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED) {
      return FromCublas(st, "cublasLtMatmulAlgoGetHeuristic");
    }
    std::vector<int> ids;
    for (int i = 0; i < found; ++i) {
      if (results[i].state != CUBLAS_STATUS_SUCCESS) continue;  // a slot the heuristic could not fill
      cublasLtMatmulAlgo_t algo = results[i].algo;
      // Split-K off where the heuristic turned it on (with no workspace it should not have).
      int32_t splits = 1;
      size_t written = 0;
      cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits, sizeof splits, &written);
      if (splits != 1) {
        const int32_t one_split = 1;
        const uint32_t no_reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
        if (cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &one_split,
                                                 sizeof one_split) != CUBLAS_STATUS_SUCCESS ||
            cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &no_reduction,
                                                 sizeof no_reduction) != CUBLAS_STATUS_SUCCESS) {
          continue;
        }
      }
      // The same configuration has the same id, whichever row count the heuristic gave it for.
      size_t id = 0;
      while (id < algos_.size() && std::memcmp(&algos_[id], &algo, sizeof algo) != 0) ++id;
      if (id == algos_.size()) algos_.push_back(algo);
      if (std::find(ids.begin(), ids.end(), static_cast<int>(id)) == ids.end()) ids.push_back(static_cast<int>(id));
    }
    return ids;
  }

  absl::StatusOr<GemmRun> Run(const GemmWay& way, int64_t m, std::span<const int64_t> rows) override {
    GemmRun out;
    if (way.kind == GemmWay::Kind::kLibrary) {
      Plan p;
      LLM42_RETURN_IF_ERROR(lt_.Describe(Key{m, n_, k_, static_cast<int>(type_), true}, p));
      p.algo = algos_[static_cast<size_t>(way.algo)];
      absl::StatusOr<size_t> workspace = lt_.FixedWorkspace(p, p.algo);
      if (!workspace.ok()) {
        out.refused = std::string(workspace.status().message());
      } else {
        p.workspace = *workspace;
        LLM42_RETURN_IF_ERROR(lt_.Launch(p, x_.get(), w_, y_.as<float>(), true));
      }
    } else {
      LLM42_CUDA_RETURN_IF_ERROR(
          LaunchFixedGemm(OwnKind(way.kind), x_.get(), w_, HalfOf(type_), y_.as<float>(), m, n_, k_, lt_.stream_));
    }
    if (!out.refused.empty()) return out;
    // The rows asked for, a run of consecutive ones per copy.
    out.rows.resize(rows.size() * static_cast<size_t>(n_));
    for (size_t i = 0; i < rows.size();) {
      size_t j = i + 1;
      while (j < rows.size() && rows[j] == rows[j - 1] + 1) ++j;
      LLM42_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out.rows.data() + i * static_cast<size_t>(n_),
                                                 y_.as<float>() + rows[i] * n_,
                                                 (j - i) * static_cast<size_t>(n_) * sizeof(float),
                                                 cudaMemcpyDeviceToHost, lt_.stream_));
      i = j;
    }
    LLM42_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(lt_.stream_));
    return out;
  }

 private:
  LtGemm& lt_;
  const void* w_;
  int64_t n_, k_;
  cudaDataType_t type_;
  int64_t max_rows_;
  std::vector<cublasLtMatmulAlgo_t>& algos_;
  DeviceBuffer x_, y_;
};

LtGemm::Plan::~Plan() {
  if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
  if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
  if (c != nullptr) cublasLtMatrixLayoutDestroy(c);
  if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
}

LtGemm::~LtGemm() {
  plans_.clear();
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

absl::Status LtGemm::Init(cudaStream_t stream) {
  stream_ = stream;
  LLM42_CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&handle_));
  auto ws = DeviceBuffer::Allocate(kWorkspaceBytes);
  if (!ws.ok()) return ws.status();
  workspace_ = std::move(ws).value();
  return absl::OkStatus();
}

absl::Status LtGemm::Describe(const Key& key, Plan& p) {
  const auto [m, n, k, type_int, fixed] = key;
  const auto type = static_cast<cudaDataType_t>(type_int);
  // Column-major view: y^T (n x m) = w (n x k, stored as k x n, transposed) * x^T (k x m).
  LLM42_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t trans_a = CUBLAS_OP_T;
  LLM42_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof trans_a));
  LLM42_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&p.a, type, static_cast<uint64_t>(k), static_cast<uint64_t>(n), k));
  LLM42_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&p.b, type, static_cast<uint64_t>(k), static_cast<uint64_t>(m), k));
  LLM42_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatrixLayoutCreate(&p.c, CUDA_R_32F, static_cast<uint64_t>(n), static_cast<uint64_t>(m), n));
  return absl::OkStatus();
}

absl::StatusOr<const LtGemm::Fixed*> LtGemm::ChooseFixed(const void* w, int64_t n, int64_t k, cudaDataType_t type) {
  const ShapeKey shape{n, k, static_cast<int>(type)};
  if (auto it = fixed_.find(shape); it != fixed_.end()) return it->second;
  // Once per process, device and shape (on the first weight of the shape; the check is of the
  // algorithms' arithmetic, which the weight's values only sample): every session of a process
  // then runs the same fixed GEMMs, and a session after the first starts without the checks.
  static Mutex mu;
  static auto& chosen ABSL_GUARDED_BY(mu) = *new absl::node_hash_map<std::tuple<int, int64_t, int64_t, int>, Fixed>();
  int device = 0;
  LLM42_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  MutexLock lock(&mu);
  auto [it, fresh] = chosen.try_emplace(std::tuple{device, n, k, static_cast<int>(type)});
  if (fresh) {
    // LLM42_CUDA_OWN_FIXED_GEMM=1 skips cuBLASLt, =fma the tensor-core kernel too.
    const char* env = std::getenv("LLM42_CUDA_OWN_FIXED_GEMM");
    const std::string force_name = env == nullptr ? "" : env;
    const FixedGemmForce force = force_name == "1"     ? FixedGemmForce::kOwnKernels
                                 : force_name == "fma" ? FixedGemmForce::kFmaChain
                                                       : FixedGemmForce::kNone;
    Fixed& f = it->second;
    absl::Status checked = [&]() -> absl::Status {
      CheckDevice check(*this, w, n, k, type, FixedGemmMaxRows(n), f.algos);
      LLM42_RETURN_IF_ERROR(check.Init());
      LLM42_ASSIGN_OR_RETURN(f.choice, ChooseFixedGemm(check, n, FixedGemmMaxRows(n), force));
      return absl::OkStatus();
    }();
    if (!checked.ok()) {
      chosen.erase(it);  // a device error: the next session tries again
      return checked;
    }
    Log(f.choice.fallback ? LogLevel::kWarning : LogLevel::kInfo, "cuda: fixed GEMM ", n, "x", k, ": ", f.choice.why,
        force == FixedGemmForce::kNone ? "" : absl::StrCat(" (LLM42_CUDA_OWN_FIXED_GEMM=", force_name, ")"));
  }
  return fixed_.emplace(shape, &it->second).first->second;  // never erased once checked
}

absl::StatusOr<size_t> LtGemm::FixedWorkspace(const Plan& p, const cublasLtMatmulAlgo_t& algo) {
  cublasLtMatmulHeuristicResult_t check{};
  const cublasStatus_t cs = cublasLtMatmulAlgoCheck(handle_, p.desc, p.a, p.b, p.c, p.c, &algo, &check);
  if (cs != CUBLAS_STATUS_SUCCESS) {
    return absl::UnimplementedError(absl::StrCat("not supported (cuBLAS status ", static_cast<int>(cs), ")"));
  }
  // A workspace does not make a kernel's arithmetic depend on the row count: with split-K off,
  // each row count's bits are checked against the reference's all the same (ChooseFixedGemm),
  // and cuBLAS gives the same bits run to run on one device and stream.
  if (check.workspaceSize > kFixedWorkspaceBytes) {
    return absl::UnimplementedError(absl::StrCat("needs ", check.workspaceSize, " bytes of workspace"));
  }
  return check.workspaceSize;
}

absl::Status LtGemm::Launch(const Plan& p, const void* x, const void* w, float* y, bool fixed) {
  const float alpha = 1.0f, beta = 0.0f;
  const size_t workspace = fixed ? p.workspace : kWorkspaceBytes;
  LLM42_CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(handle_, p.desc, &alpha, w, p.a, x, p.b, &beta, y, p.c, y, p.c, &p.algo,
                                              workspace == 0 ? nullptr : workspace_.get(), workspace, stream_));
  return absl::OkStatus();
}

absl::Status LtGemm::RunFixedWay(const Fixed& f, const GemmWay& way, const void* x, int64_t m, const void* w,
                                 int64_t n, int64_t k, cudaDataType_t type, float* y) {
  if (way.kind != GemmWay::Kind::kLibrary) {
    LLM42_CUDA_RETURN_IF_ERROR(LaunchFixedGemm(OwnKind(way.kind), x, w, HalfOf(type), y, m, n, k, stream_));
    return absl::OkStatus();
  }
  LLM42_ASSIGN_OR_RETURN(const Plan* plan, CachedPlan(Key{m, n, k, static_cast<int>(type), true}, [&](Plan& p) {
    p.algo = f.algos[static_cast<size_t>(way.algo)];
    LLM42_ASSIGN_OR_RETURN(p.workspace, FixedWorkspace(p, p.algo));
    return absl::OkStatus();
  }));
  return Launch(*plan, x, w, y, true);
}

absl::StatusOr<const LtGemm::Plan*> LtGemm::CachedPlan(const Key& key,
                                                       const std::function<absl::Status(Plan&)>& choose) {
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    auto plan = std::make_unique<Plan>();
    LLM42_RETURN_IF_ERROR(Describe(key, *plan));
    LLM42_RETURN_IF_ERROR(choose(*plan));
    it = plans_.emplace(key, std::move(plan)).first;
  }
  return it->second.get();
}

absl::Status LtGemm::Run(const float* x, int64_t m, int64_t k, cudaDataType_t type, std::span<const Output> outs,
                         bool fixed) {
  if (m == 0 || outs.empty()) return absl::OkStatus();
  absl::InlinedVector<const Fixed*, 4> chosen(outs.size(), nullptr);
  int64_t rows = m;
  if (fixed) {
    for (size_t i = 0; i < outs.size(); ++i) {
      LLM42_ASSIGN_OR_RETURN(chosen[i], ChooseFixed(outs[i].w, outs[i].n, k, type));
      rows = std::max(rows, chosen[i]->choice.PaddedRows(m));
    }
  }
  // Rounded once for every output, with room for the padding: rows past m keep whatever they
  // held (no row's outputs depend on another row's inputs).
  LLM42_RETURN_IF_ERROR(half_x_.Grow(static_cast<size_t>(rows * k) * 2));
  LLM42_CUDA_RETURN_IF_ERROR(LaunchToHalf(x, static_cast<size_t>(m * k), HalfOf(type), half_x_.get(), stream_));
  for (size_t i = 0; i < outs.size(); ++i) {
    const Output& o = outs[i];
    LLM42_RETURN_IF_ERROR(fixed ? RunFixed(*chosen[i], m, o.w, o.n, k, type, o.y) : RunFast(m, o.w, o.n, k, type, o.y));
  }
  return absl::OkStatus();
}

absl::Status LtGemm::RunFixed(const Fixed& f, int64_t m, const void* w, int64_t n, int64_t k, cudaDataType_t type,
                              float* y) {
  for (const FixedGemmChoice::Chunk& c : f.choice.Chunks(m)) {
    const auto* xc = half_x_.as<uint8_t>() + c.first_row * k * 2;
    float* yc = y + c.first_row * n;
    if (c.padded_rows == c.rows) {
      LLM42_RETURN_IF_ERROR(RunFixedWay(f, c.way, xc, c.rows, w, n, k, type, yc));
      continue;
    }
    // Padded (the last chunk): its outputs into a buffer of the checked row count, then its rows out.
    LLM42_RETURN_IF_ERROR(pad_y_.Grow(static_cast<size_t>(c.padded_rows * n) * sizeof(float)));
    LLM42_RETURN_IF_ERROR(RunFixedWay(f, c.way, xc, c.padded_rows, w, n, k, type, pad_y_.as<float>()));
    LLM42_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(yc, pad_y_.get(), static_cast<size_t>(c.rows * n) * sizeof(float),
                                               cudaMemcpyDeviceToDevice, stream_));
  }
  return absl::OkStatus();
}

absl::Status LtGemm::RunFast(int64_t m, const void* w, int64_t n, int64_t k, cudaDataType_t type, float* y) {
  // The heuristic's first algorithm for this m, with the workspace.
  LLM42_ASSIGN_OR_RETURN(const Plan* plan, CachedPlan(Key{m, n, k, static_cast<int>(type), false}, [&](Plan& p) {
    cublasLtMatmulPreference_t pref = nullptr;
    LLM42_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t ws = kWorkspaceBytes;
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    if (s == CUBLAS_STATUS_SUCCESS) {
      s = cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.c, p.c, pref, 1, &result, &found);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    LLM42_CUBLAS_RETURN_IF_ERROR(s);
    if (found == 0) {
      return absl::UnimplementedError(absl::StrCat("cuBLASLt has no algorithm for a ", m, "x", k, " by ", n, "x", k,
                                                   " GEMM of this type"));
    }
    p.algo = result.algo;
    return absl::OkStatus();
  }));
  return Launch(*plan, half_x_.get(), w, y, false);
}

}  // namespace llm42::cuda
