#include "lib/backend/cuda/lt_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/backend/cuda/cuda_status.h"
#include "lib/backend/cuda/kernels.cuh"
#include "lib/util/ggml_types.h"
#include "lib/util/logging.h"
#include "lib/util/status.h"

namespace llm42::cuda {
namespace {

// Batch sizes a pinned fixed algorithm must support (a verify group, a prefill chunk, a decode
// batch: anything up to the largest max_batch_tokens a session takes).
constexpr int64_t kProbeMs[] = {1, 2, 3, 7, 8, 17, 64, 100, 256, 512, 1000, 2048, 4096, 8192, 16384};
// The candidates are the heuristic's for m = kCheckM (verify passes and prefill chunks are that
// big or bigger; decode is smaller and memory-bound either way); the self-check compares the
// rows of m = 1, 7 and 64 against m = kCheckM.
constexpr int64_t kCheckM = 256;
constexpr int kCandidates = 8;

Half HalfOf(cudaDataType_t t) { return t == CUDA_R_16F ? Half::kF16 : Half::kBf16; }

// "" when `got` equals `ref` (both rows of n) to within f32 rounding of a different summation
// order: per row, 2e-3 of the row's largest |ref| plus 1e-5. A wrong kernel (a misplaced
// fragment, a skipped k step) misses by the size of the values themselves.
std::string DisagreementWithReference(const std::vector<float>& got, const std::vector<float>& ref, int64_t n) {
  for (size_t row0 = 0; row0 < ref.size(); row0 += static_cast<size_t>(n)) {
    float scale = 0;
    for (int64_t j = 0; j < n; ++j) scale = std::max(scale, std::abs(ref[row0 + static_cast<size_t>(j)]));
    const float tolerance = 2e-3f * scale + 1e-5f;
    for (int64_t j = 0; j < n; ++j) {
      const size_t i = row0 + static_cast<size_t>(j);
      if (!(std::abs(got[i] - ref[i]) <= tolerance)) {
        return absl::StrCat("output (", row0 / static_cast<size_t>(n), ", ", j, ") is ", got[i],
                            " where the FMA chains give ", ref[i]);
      }
    }
  }
  return "";
}

}  // namespace

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
  if (auto it = fixed_.find(shape); it != fixed_.end()) return &it->second;

  // The self-check's data: kCheckM random rows (a fixed xorshift, so every run checks the same).
  std::vector<uint16_t> host_x(static_cast<size_t>(kCheckM * k));
  uint32_t r = 2463534242u;
  for (uint16_t& v : host_x) {
    r ^= r << 13;
    r ^= r >> 17;
    r ^= r << 5;
    const float f = static_cast<float>(r >> 8) * 0x1.0p-23f - 1.0f;
    v = type == CUDA_R_16F ? Fp32ToFp16(f) : Fp32ToBf16(f);
  }
  LLM42_ASSIGN_OR_RETURN(DeviceBuffer dx, DeviceBuffer::Allocate(host_x.size() * 2));
  LLM42_ASSIGN_OR_RETURN(DeviceBuffer dy, DeviceBuffer::Allocate(static_cast<size_t>(kCheckM * n) * sizeof(float)));
  LLM42_CUDA_RETURN_IF_ERROR(cudaMemcpy(dx.get(), host_x.data(), host_x.size() * 2, cudaMemcpyHostToDevice));
  std::vector<float> full(static_cast<size_t>(kCheckM * n)), part(full.size());
  auto fetch = [&](std::vector<float>& dst, int64_t m) -> absl::Status {
    LLM42_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst.data(), dy.get(), static_cast<size_t>(m * n) * sizeof(float),
                                               cudaMemcpyDeviceToHost, stream_));
    LLM42_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return absl::OkStatus();
  };
  // Runs `run(m)` (writing m x n outputs into dy) at m = kCheckM, 1, 7 and 64; "" when every
  // row of the smaller runs equals the same row of m = kCheckM bitwise, else why not. Leaves the
  // m = kCheckM outputs in `full`.
  auto row_invariance = [&](const std::function<absl::Status(int64_t)>& run) -> absl::StatusOr<std::string> {
    for (int64_t m : {kCheckM, int64_t{1}, int64_t{7}, int64_t{64}}) {
      if (absl::Status s = run(m); !s.ok()) return s;
      if (absl::Status s = fetch(m == kCheckM ? full : part, m); !s.ok()) return s;
      if (m != kCheckM && std::memcmp(part.data(), full.data(), static_cast<size_t>(m * n) * sizeof(float)) != 0) {
        return absl::StrCat("rows of m = ", m, " differ from those of m = ", kCheckM);
      }
    }
    return std::string();
  };

  // LLM42_CUDA_OWN_FIXED_GEMM=1 skips cuBLASLt, =fma the tensor-core kernel too.
  const char* force_env = std::getenv("LLM42_CUDA_OWN_FIXED_GEMM");
  std::string force = force_env == nullptr ? "" : force_env;
  if (force != "1" && force != "fma") force.clear();
  Fixed choice;
  std::string rejected;  // why each candidate failed, for the log
  auto reject = [&](const std::string& who, const std::string& why) {
    absl::StrAppend(&rejected, rejected.empty() ? "" : "; ", who, ": ", why);
  };

  // 1. A pinned cuBLASLt algorithm: candidates are the heuristic's for m = kCheckM, no workspace.
  int found = 0;
  cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
  if (force.empty()) {
    Plan probe;
    if (absl::Status s = Describe(Key{kCheckM, n, k, static_cast<int>(type), true}, probe); !s.ok()) return s;
    cublasLtMatmulPreference_t pref = nullptr;
    LLM42_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t no_workspace = 0;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                             &no_workspace, sizeof no_workspace);
    if (st == CUBLAS_STATUS_SUCCESS) {
      st = cublasLtMatmulAlgoGetHeuristic(handle_, probe.desc, probe.a, probe.b, probe.c, probe.c, pref, kCandidates,
                                          results, &found);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED) {
      return FromCublas(st, "cublasLtMatmulAlgoGetHeuristic");
    }
  }
  for (int i = 0; i < found; ++i) {
    cublasLtMatmulAlgo_t algo = results[i].algo;
    const std::string who = absl::StrCat("cuBLASLt candidate ", i + 1);
    // Split-K off where the heuristic turned it on (with no workspace it should not have).
    int32_t splits = 1;
    size_t written = 0;
    cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits, sizeof splits, &written);
    if (splits != 1) {
      const int32_t one_split = 1;
      const uint32_t no_reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
      if (cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &one_split, sizeof one_split) !=
              CUBLAS_STATUS_SUCCESS ||
          cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &no_reduction,
                                               sizeof no_reduction) != CUBLAS_STATUS_SUCCESS) {
        reject(who, absl::StrCat("split-K ", splits, " cannot be turned off"));
        continue;
      }
    }
    std::string unsupported;
    for (int64_t m : kProbeMs) {
      if (m * n > (int64_t{1} << 31)) break;  // outputs this large are not this engine's batches
      Plan p;
      if (absl::Status s = Describe(Key{m, n, k, static_cast<int>(type), true}, p); !s.ok()) return s;
      cublasLtMatmulHeuristicResult_t check{};
      const cublasStatus_t cs = cublasLtMatmulAlgoCheck(handle_, p.desc, p.a, p.b, p.c, p.c, &algo, &check);
      if (cs != CUBLAS_STATUS_SUCCESS) {
        unsupported = absl::StrCat("not supported at m = ", m, " (cuBLAS status ", static_cast<int>(cs), ")");
      } else if (check.workspaceSize != 0) {
        unsupported = absl::StrCat("needs ", check.workspaceSize, " bytes of workspace at m = ", m);
      }
      if (!unsupported.empty()) break;
    }
    if (!unsupported.empty()) {
      reject(who, unsupported);
      continue;
    }
    LLM42_ASSIGN_OR_RETURN(std::string differs, row_invariance([&](int64_t m) -> absl::Status {
      Plan p;
      if (absl::Status s = Describe(Key{m, n, k, static_cast<int>(type), true}, p); !s.ok()) return s;
      p.algo = algo;
      return Launch(p, dx.get(), m, w, n, k, type, dy.as<float>(), true);
    }));
    if (!differs.empty()) {
      reject(who, differs);
      continue;
    }
    int32_t id = 0;
    cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &written);
    choice.own.reset();
    choice.algo = algo;
    choice.why = absl::StrCat("cublasLt algo ", id, " (candidate ", i + 1, " of ", found, ", checked)");
    break;
  }

  // 2. The tensor-core kernel: row-invariant, and within rounding of the FMA chains.
  if (choice.own.has_value() && force != "fma") {
    auto own = [&](FixedGemmKind kind, int64_t m) -> absl::Status {
      LLM42_CUDA_RETURN_IF_ERROR(LaunchFixedGemm(kind, dx.get(), w, HalfOf(type), dy.as<float>(), m, n, k, stream_));
      return absl::OkStatus();
    };
    LLM42_ASSIGN_OR_RETURN(std::string why, row_invariance([&](int64_t m) {
      return own(FixedGemmKind::kTensorCore, m);
    }));
    if (why.empty()) {
      if (absl::Status s = own(FixedGemmKind::kFmaChain, kCheckM); !s.ok()) return s;
      if (absl::Status s = fetch(part, kCheckM); !s.ok()) return s;
      why = DisagreementWithReference(full, part, n);
    }
    if (why.empty()) {
      choice.own = FixedGemmKind::kTensorCore;
    } else {
      reject(FixedGemmKindName(FixedGemmKind::kTensorCore), why);
    }
  }
  const bool fallback = choice.own == FixedGemmKind::kFmaChain;
  if (choice.own.has_value()) {
    choice.why = absl::StrCat(FixedGemmKindName(*choice.own), force.empty() ? "" : absl::StrCat(" (LLM42_CUDA_OWN_FIXED_GEMM=", force, ")"),
                              rejected.empty() ? "" : absl::StrCat(": ", rejected));
  }
  Log(fallback ? LogLevel::kWarning : LogLevel::kInfo, "cuda: fixed GEMM ", n, "x", k, ": ", choice.why);
  return &fixed_.emplace(shape, choice).first->second;
}

absl::Status LtGemm::Launch(const Plan& p, const void* x, int64_t m, const void* w, int64_t n, int64_t k,
                            cudaDataType_t type, float* y, bool fixed) {
  if (p.own.has_value()) {
    LLM42_CUDA_RETURN_IF_ERROR(LaunchFixedGemm(*p.own, x, w, HalfOf(type), y, m, n, k, stream_));
    return absl::OkStatus();
  }
  const float alpha = 1.0f, beta = 0.0f;
  LLM42_CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(handle_, p.desc, &alpha, w, p.a, x, p.b, &beta, y, p.c, y, p.c, &p.algo,
                                              fixed ? nullptr : workspace_.get(), fixed ? 0 : kWorkspaceBytes,
                                              stream_));
  return absl::OkStatus();
}

absl::Status LtGemm::Run(const void* x, int64_t m, const void* w, int64_t n, int64_t k, cudaDataType_t type,
                         float* y, bool fixed) {
  if (m == 0) return absl::OkStatus();
  const Key key{m, n, k, static_cast<int>(type), fixed};
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    auto plan = std::make_unique<Plan>();
    if (absl::Status s = Describe(key, *plan); !s.ok()) return s;
    if (fixed) {
      LLM42_ASSIGN_OR_RETURN(const Fixed* choice, ChooseFixed(w, n, k, type));
      plan->own = choice->own;
      plan->algo = choice->algo;
      cublasLtMatmulHeuristicResult_t check{};
      if (!plan->own.has_value() &&
          (cublasLtMatmulAlgoCheck(handle_, plan->desc, plan->a, plan->b, plan->c, plan->c, &plan->algo, &check) !=
               CUBLAS_STATUS_SUCCESS ||
           check.workspaceSize != 0)) {
        return absl::InternalError(absl::StrCat("cuBLASLt refuses the fixed GEMM's pinned algorithm for ", n, "x", k,
                                                " at m = ", m, " (it passed at every probed m)"));
      }
    } else {
      cublasLtMatmulPreference_t pref = nullptr;
      LLM42_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&pref));
      const uint64_t ws = kWorkspaceBytes;
      cublasLtMatmulHeuristicResult_t result{};
      int found = 0;
      cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
      if (s == CUBLAS_STATUS_SUCCESS) {
        s = cublasLtMatmulAlgoGetHeuristic(handle_, plan->desc, plan->a, plan->b, plan->c, plan->c, pref, 1, &result,
                                           &found);
      }
      cublasLtMatmulPreferenceDestroy(pref);
      LLM42_CUBLAS_RETURN_IF_ERROR(s);
      if (found == 0) {
        return absl::UnimplementedError(absl::StrCat("cuBLASLt has no algorithm for a ", m, "x", k, " by ", n, "x", k,
                                                     " GEMM of this type"));
      }
      plan->algo = result.algo;
    }
    it = plans_.emplace(key, std::move(plan)).first;
  }
  return Launch(*it->second, x, m, w, n, k, type, y, fixed);
}

}  // namespace llm42::cuda
