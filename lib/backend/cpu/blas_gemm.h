#ifndef LLM42_BACKEND_CPU_BLAS_GEMM_H_
#define LLM42_BACKEND_CPU_BLAS_GEMM_H_

#include <cstddef>
#include <cstdint>

#include "lib/util/aligned_vector.h"
#include "lib/util/ggml_types.h"

namespace llm42::internal {

// The fast schedule's prompt GEMMs (512 rows and more: cpu_backend.cc's kBlasMinRows) through
// BLIS (Debian's libblis, its serial flavour: each pool thread calls it on its own weight rows,
// and BLIS is re-entrant), where the build found it.
// Why a library here: the packed GEMM's tile (packed_gemm.h) computes the fixed family's
// arithmetic (an 8-lane accumulator per output, then the fixed tree), and that dot-product layout
// holds a Zen 3 core at 70-79 GFLOP/s on llama-110m's f32 shapes at 512 rows, where BLIS's
// outer-product kernels, with their own summation order (which fast is free to take), run
// 86-89 (one thread each, the same run; the FMA peak is ~102). fixed never comes here.

// True when the build has BLIS (LLM42_WITH_BLIS): BlasGemm computes; false, it declines.
bool BlasGemmBuilt();
// BlasGemmBuilt(), the CPU has AVX2, BLIS has kernels for this CPU (its configuration for it is
// not the generic one), and neither LLM42_CPU_BLAS nor LLM42_CPU_SIMD is off: the backend sends
// fast prompts here.
bool BlasGemmAvailable();

// PackedGemm's contract (packed_gemm.h) for the fast family: y[rows[i] * ldy + r] = dot(weight row
// r, x + rows[i] * k) for r in [r0, r1) and every i < n_rows; f32 rows are read in place, f16,
// bf16, q8_0 and q4_0 ones converted to their exact f32 values a slab at a time into `scratch`
// (the caller's, one per thread). The activation rows must be consecutive (rows[i] = rows[0] +
// i); otherwise, or without BLAS, nothing is written and it returns false. Each call packs all
// the activation rows (BLIS's own copy), so it pays with many weight rows per call: give it a
// thread's whole share, not a fine-grained chunk.
bool BlasGemm(GgmlType type, const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, const float* x, int64_t k,
              const int64_t* rows, int64_t n_rows, float* y, int64_t ldy, AlignedVector<float>& scratch);

}  // namespace llm42::internal

#endif  // LLM42_BACKEND_CPU_BLAS_GEMM_H_
