#ifndef LLM42_BACKEND_CPU_CPU_BACKEND_H_
#define LLM42_BACKEND_CPU_CPU_BACKEND_H_

#include <memory>

#include "lib/backend/backend.h"
#include "lib/util/thread_pool.h"

namespace llm42 {

// The reference backend: multi-threaded, AVX2/FMA/F16C kernels chosen at run time with a
// portable fallback.
class CpuBackend final : public Backend {
 public:
  // n_threads 0 = all cores. allow_simd false forces the portable kernels (tests).
  explicit CpuBackend(int n_threads, bool allow_simd = true);

  std::string_view name() const override { return "cpu"; }
  int threads() const { return pool_.size(); }
  bool simd() const { return simd_; }

  void MatMul(const float* x, int64_t m, const WeightMatrix& w, float* y) override;
  void RmsNorm(const float* x, const float* weight, int64_t m, int64_t n, float eps,
               float* y) override;
  void Rope(float* x, int64_t m, int64_t n_heads, int64_t head_dim, int64_t n_rot,
            const int32_t* positions, float freq_base) override;
  void Attention(const float* q, const AttentionInput& in, float* out) override;
  void SwiGlu(const float* gate, const float* up, int64_t n, float* out) override;
  void Embed(const WeightMatrix& table, const int32_t* tokens, int64_t m, float* out) override;

 private:
  ThreadPool pool_;
  bool simd_;
};

int DefaultThreadCount();

}  // namespace llm42

#endif  // LLM42_BACKEND_CPU_CPU_BACKEND_H_
