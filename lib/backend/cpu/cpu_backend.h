#ifndef LLM42_BACKEND_CPU_CPU_BACKEND_H_
#define LLM42_BACKEND_CPU_CPU_BACKEND_H_

#include <memory>
#include <vector>

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

  // fast: 1-row GEMV kernel or 4-row register tiles; fixed: the fixed dot family (row_dot.h)
  // in groups of up to 3 rows, each row's bits independent of its group.
  void MatMul(const float* x, int64_t m, const WeightMatrix& w, float* y, Schedules s) override;
  // Per-row sequential reductions: already fixed, so both schedules run the same code.
  void RmsNorm(const float* x, const float* weight, int64_t m, int64_t n, float eps, float* y,
               Schedules s) override;
  void Rope(float* x, int64_t m, int64_t n_heads, int64_t head_dim, const RopeParams& rope,
            const int32_t* positions, Schedules s) override;
  // fixed: the prefix in chunks of kAttentionChunk positions, combined in order. fast: the
  // whole prefix in one pass, or split evenly across the threads when few (token, head) pairs
  // would leave threads idle.
  void Attention(const float* q, const AttentionInput& in, float* out, Schedules s) override;
  void SwiGlu(const float* gate, const float* up, int64_t n, float* out, Schedule s) override;
  void Embed(const WeightMatrix& table, const int32_t* tokens, int64_t m, float* out,
             Schedules s) override;

  static constexpr int64_t kAttentionChunk = 256;

 private:
  ThreadPool pool_;
  bool simd_;
  // MatMul's split of a batch's rows by schedule, kept to avoid allocating per op. The backend
  // is driven by one thread (the session's engine), like the pool.
  std::vector<int64_t> fast_rows_, fixed_rows_;
};

int DefaultThreadCount();

}  // namespace llm42

#endif  // LLM42_BACKEND_CPU_CPU_BACKEND_H_
