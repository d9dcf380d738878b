#include "lib/backend/cuda/lt_gemm.h"

#include "absl/strings/str_cat.h"
#include "lib/backend/cuda/cuda_status.h"

namespace llm42::cuda {

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

absl::Status LtGemm::MakePlan(const Key& key, Plan& p) {
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
  cublasLtMatmulPreference_t pref = nullptr;
  LLM42_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = fixed ? 0 : kWorkspaceBytes;
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
}

absl::Status LtGemm::Run(const void* x, int64_t m, const void* w, int64_t n, int64_t k, cudaDataType_t type,
                         float* y, bool fixed) {
  if (m == 0) return absl::OkStatus();
  const Key key{m, n, k, static_cast<int>(type), fixed};
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    auto plan = std::make_unique<Plan>();
    if (absl::Status s = MakePlan(key, *plan); !s.ok()) return s;
    it = plans_.emplace(key, std::move(plan)).first;
  }
  const Plan& p = *it->second;
  const float alpha = 1.0f, beta = 0.0f;
  LLM42_CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(handle_, p.desc, &alpha, w, p.a, x, p.b, &beta, y, p.c, y, p.c, &p.algo,
                                              fixed ? nullptr : workspace_.get(), fixed ? 0 : kWorkspaceBytes,
                                              stream_));
  return absl::OkStatus();
}

}  // namespace llm42::cuda
