#ifndef LLM42_BACKEND_CPU_SIMD_TARGETS_H_
#define LLM42_BACKEND_CPU_SIMD_TARGETS_H_

// The instruction sets the CPU backend's kernels are compiled for, one attribute each; a kernel
// runs only after its selector has checked the CPU (row_dot.h, packed_gemm.h, int8_dot.h,
// attention.h). The one place the build's x86 intrinsics come from.
#if defined(__x86_64__)
// GCC 12's AVX-512 headers build some intrinsics from _mm*_undefined_*() and then warn that
// the undefined value "is (or may be) used uninitialized" (false positives of its own headers).
#if !defined(__clang__)  // clang has no -Wmaybe-uninitialized (and no such false positives)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

// The kernels' x86 sections (#if LLM42_X86): one definition for every file.
#define LLM42_X86 1

// AVX2 with FMA and F16C (every weight type's conversions).
#define LLM42_AVX2 __attribute__((target("avx2,fma,f16c")))
// AVX-512 F and DQ (512-bit float kernels: 8-lane halves, broadcasts of 256-bit rows).
#define LLM42_AVX512 __attribute__((target("avx512f,avx512dq,avx2,fma,f16c")))
// AVX-512 with VNNI (integer dot products of bytes), BW and VL.
#define LLM42_VNNI512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx2,fma,f16c")))
// AVX-512 with BF16 (dot products of bf16 pairs into f32: the fast schedule's bf16 prompts).
#define LLM42_BF16DOT512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx2,fma,f16c")))
#endif

#endif  // LLM42_BACKEND_CPU_SIMD_TARGETS_H_
