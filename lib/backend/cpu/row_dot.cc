#include "lib/backend/cpu/row_dot.h"

#include "lib/backend/cpu/fixed_tree.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__)
#include <immintrin.h>
#define LLM42_X86 1
#endif

namespace llm42::internal {
namespace {

// Element loaders: weight i of a row as f32.
struct F32Loader {
  static float At(const uint8_t* w, int64_t i) {
    float f;
    std::memcpy(&f, w + 4 * i, 4);
    return f;
  }
};
struct F16Loader {
  static float At(const uint8_t* w, int64_t i) {
    uint16_t h;
    std::memcpy(&h, w + 2 * i, 2);
    return Fp16ToFp32(h);
  }
};
struct Bf16Loader {
  static float At(const uint8_t* w, int64_t i) {
    uint16_t h;
    std::memcpy(&h, w + 2 * i, 2);
    return Bf16ToFp32(h);
  }
};
// Quantized types: weight i is Scale(block) * Q(i), Q an integer.
struct Q8_0Loader {
  static float Q(const uint8_t* w, int64_t i) {
    return static_cast<float>((reinterpret_cast<const BlockQ8_0*>(w) + i / 32)->q[i % 32]);
  }
  static float Scale(const uint8_t* w, int64_t block) {
    return Fp16ToFp32((reinterpret_cast<const BlockQ8_0*>(w) + block)->scale);
  }
  static float At(const uint8_t* w, int64_t i) { return Scale(w, i / 32) * Q(w, i); }
};

struct Q4_0Loader {
  static float Q(const uint8_t* w, int64_t i) {
    const auto* b = reinterpret_cast<const BlockQ4_0*>(w) + i / 32;
    const int64_t j = i % 32;
    return static_cast<float>((j < 16 ? (b->q[j] & 0x0F) : (b->q[j - 16] >> 4)) - 8);
  }
  static float Scale(const uint8_t* w, int64_t block) {
    return Fp16ToFp32((reinterpret_cast<const BlockQ4_0*>(w) + block)->scale);
  }
  static float At(const uint8_t* w, int64_t i) { return Scale(w, i / 32) * Q(w, i); }
};

template <typename L, int NX>
void PortableDot(const uint8_t* w, const float* const* x, int64_t k, float* out) {
  constexpr int kLanes = 8;
  float acc[NX][kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= k; i += kLanes) {
    float wv[kLanes];
    for (int l = 0; l < kLanes; ++l) wv[l] = L::At(w, i + l);
    for (int j = 0; j < NX; ++j) {
      for (int l = 0; l < kLanes; ++l) acc[j][l] += wv[l] * x[j][i + l];
    }
  }
  for (int j = 0; j < NX; ++j) {
    float s = 0;
    for (int l = 0; l < kLanes; ++l) s += acc[j][l];
    for (int64_t t = i; t < k; ++t) s += L::At(w, t) * x[j][t];
    out[j] = s;
  }
}

// The fixed family's arithmetic, lane by lane (see row_dot.h).
template <typename L>
float PortableFixedDot(const uint8_t* w, const float* x, int64_t k) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    for (int l = 0; l < 8; ++l) acc[l] = std::fma(L::At(w, i + l), x[i + l], acc[l]);
  }
  float h[4];
  for (int l = 0; l < 4; ++l) h[l] = acc[l] + acc[l + 4];
  float s = (h[0] + h[2]) + (h[1] + h[3]);
  for (; i < k; ++i) s = std::fma(L::At(w, i), x[i], s);
  return s;
}

// The fixed family's arithmetic for quantized rows (k a whole number of 32-weight blocks), lane
// by lane: per block, lane l sums its weights l and l+8 (lo) and l+16 and l+24 (hi) as a product
// and a fused multiply-add of the integer weights, then adds lo and hi times the block's scale
// into the accumulator with fused multiply-adds; the same reduction tree.
template <typename QL>
float PortableFixedBlockDot(const uint8_t* w, const float* x, int64_t k) {
  float acc[8] = {};
  for (int64_t b = 0; b < k / 32; ++b) {
    const float d = QL::Scale(w, b);
    const int64_t i = 32 * b;
    for (int l = 0; l < 8; ++l) {
      float lo = QL::Q(w, i + l) * x[i + l];
      lo = std::fma(QL::Q(w, i + 8 + l), x[i + 8 + l], lo);
      float hi = QL::Q(w, i + 16 + l) * x[i + 16 + l];
      hi = std::fma(QL::Q(w, i + 24 + l), x[i + 24 + l], hi);
      acc[l] = std::fma(lo, d, acc[l]);
      acc[l] = std::fma(hi, d, acc[l]);
    }
  }
  float h[4];
  for (int l = 0; l < 4; ++l) h[l] = acc[l] + acc[l + 4];
  return (h[0] + h[2]) + (h[1] + h[3]);
}

template <typename L>
void PortableFixedRowDotT(const uint8_t* w, const float* const* x, int n_x, int64_t k, float* out) {
  for (int j = 0; j < n_x; ++j) {
    if constexpr (std::is_same_v<L, Q8_0Loader> || std::is_same_v<L, Q4_0Loader>) {
      out[j] = PortableFixedBlockDot<L>(w, x[j], k);
    } else {
      out[j] = PortableFixedDot<L>(w, x[j], k);
    }
  }
}

template <typename L>
void PortableRowDotT(const uint8_t* w, const float* const* x, int n_x, int64_t k, float* out) {
  switch (n_x) {
    case 1: return PortableDot<L, 1>(w, x, k, out);
    case 2: return PortableDot<L, 2>(w, x, k, out);
    case 3: return PortableDot<L, 3>(w, x, k, out);
    default: return PortableDot<L, 4>(w, x, k, out);
  }
}

#if LLM42_X86
#define LLM42_AVX2 __attribute__((target("avx2,fma,f16c")))

// Eight weights starting at i (i a multiple of 8) as f32.
struct F32Vec {
  LLM42_AVX2 static __m256 Load8(const uint8_t* w, int64_t i) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(w) + i);
  }
};
struct F16Vec {
  LLM42_AVX2 static __m256 Load8(const uint8_t* w, int64_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 2 * i)));
  }
};
struct Bf16Vec {
  LLM42_AVX2 static __m256 Load8(const uint8_t* w, int64_t i) {
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 2 * i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
  }
};

// NX activation rows, U independent accumulators each to hide FMA latency.
template <typename V, typename L, int NX, int U>
LLM42_AVX2 void Avx2Dot(const uint8_t* w, const float* const* x, int64_t k, float* out) {
  __m256 acc[NX][U];
  for (int j = 0; j < NX; ++j) {
    for (int u = 0; u < U; ++u) acc[j][u] = _mm256_setzero_ps();
  }
  int64_t i = 0;
  for (; i + 8 * U <= k; i += 8 * U) {
    for (int u = 0; u < U; ++u) {
      const __m256 wv = V::Load8(w, i + 8 * u);
      for (int j = 0; j < NX; ++j) {
        acc[j][u] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x[j] + i + 8 * u), acc[j][u]);
      }
    }
  }
  for (; i + 8 <= k; i += 8) {
    const __m256 wv = V::Load8(w, i);
    for (int j = 0; j < NX; ++j) acc[j][0] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x[j] + i), acc[j][0]);
  }
  for (int j = 0; j < NX; ++j) {
    for (int u = 1; u < U; ++u) acc[j][0] = _mm256_add_ps(acc[j][0], acc[j][u]);
    float s = FixedTreeSum(acc[j][0]);
    for (int64_t t = i; t < k; ++t) s = std::fma(L::At(w, t), x[j][t], s);
    out[j] = s;
  }
}

template <typename V, typename L>
LLM42_AVX2 void Avx2Tile(const uint8_t* w0, const uint8_t* w1, const float* const* x, int64_t k,
                         float* out) {
  __m256 acc[4][2];
  for (int j = 0; j < 4; ++j) acc[j][0] = acc[j][1] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    const __m256 a = V::Load8(w0, i), b = V::Load8(w1, i);
    for (int j = 0; j < 4; ++j) {
      const __m256 xv = _mm256_loadu_ps(x[j] + i);
      acc[j][0] = _mm256_fmadd_ps(a, xv, acc[j][0]);
      acc[j][1] = _mm256_fmadd_ps(b, xv, acc[j][1]);
    }
  }
  for (int j = 0; j < 4; ++j) {
    float s0 = FixedTreeSum(acc[j][0]), s1 = FixedTreeSum(acc[j][1]);
    for (int64_t t = i; t < k; ++t) {
      s0 = std::fma(L::At(w0, t), x[j][t], s0);
      s1 = std::fma(L::At(w1, t), x[j][t], s1);
    }
    out[j * 2] = s0;
    out[j * 2 + 1] = s1;
  }
}

// One accumulator per (weight row, activation row) pair, whatever the grouping: the fixed
// family (row_dot.h). The tile above and Avx2Gemv4 below run the same per-pair arithmetic.
template <typename V, typename L>
LLM42_AVX2 void Avx2FixedRowDotT(const uint8_t* w, const float* const* x, int n_x, int64_t k, float* out) {
  switch (n_x) {
    case 1: return Avx2Dot<V, L, 1, 1>(w, x, k, out);
    case 2: return Avx2Dot<V, L, 2, 1>(w, x, k, out);
    case 3: return Avx2Dot<V, L, 3, 1>(w, x, k, out);
    default: return Avx2Dot<V, L, 4, 1>(w, x, k, out);
  }
}

// Four weight rows against one activation row: four independent chains hide the FMA latency
// of the one-accumulator-per-pair arithmetic in decode.
template <typename V, typename L>
LLM42_AVX2 void Avx2Gemv4(const uint8_t* const* w, const float* x, int64_t k, float* out) {
  __m256 acc[4];
  for (int r = 0; r < 4; ++r) acc[r] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    const __m256 xv = _mm256_loadu_ps(x + i);
    for (int r = 0; r < 4; ++r) acc[r] = _mm256_fmadd_ps(V::Load8(w[r], i), xv, acc[r]);
  }
  for (int r = 0; r < 4; ++r) {
    float s = FixedTreeSum(acc[r]);
    for (int64_t t = i; t < k; ++t) s = std::fma(L::At(w[r], t), x[t], s);
    out[r] = s;
  }
}

#define LLM42_AVX512VL __attribute__((target("avx512f,avx512vl,avx2,fma,f16c")))

// Avx2Gemv4's arithmetic for R weight rows at once: with AVX-512VL's 32 registers, R = 16
// chains hide the FMA latency that four leave exposed in decode.
template <typename V, typename L, int R>
LLM42_AVX512VL void WideGemv(const uint8_t* const* w, const float* x, int64_t k, float* out) {
  __m256 acc[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    const __m256 xv = _mm256_loadu_ps(x + i);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(V::Load8(w[r], i), xv, acc[r]);
  }
  for (int r = 0; r < R; ++r) {
    float s = FixedTreeSum(acc[r]);
    for (int64_t t = i; t < k; ++t) s = std::fma(L::At(w[r], t), x[t], s);
    out[r] = s;
  }
}

// Quantized blocks for the fast family: the 32 weights of block b as f32 without the scale
// (decoded once per block, not per 8-weight step), and the scale.
struct Q8_0Block {
  LLM42_AVX2 static float Decode(const uint8_t* w, int64_t b, __m256 q[4]) {
    const auto* blk = reinterpret_cast<const BlockQ8_0*>(w) + b;
    for (int i = 0; i < 4; ++i) {
      const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk->q + 8 * i));
      q[i] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes));
    }
    return _cvtsh_ss(blk->scale);
  }
};
struct Q4_0Block {
  // Eight nibbles (low bytes of v) as f32 weights around zero.
  LLM42_AVX2 static __m256 Widen(__m128i v) {
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_cvtepu8_epi32(v), _mm256_set1_epi32(8)));
  }
  LLM42_AVX2 static float Decode(const uint8_t* w, int64_t b, __m256 q[4]) {
    const auto* blk = reinterpret_cast<const BlockQ4_0*>(w) + b;
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->q));
    const __m128i mask = _mm_set1_epi8(0x0F);
    const __m128i lo = _mm_and_si128(bytes, mask), hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), mask);
    q[0] = Widen(lo);
    q[1] = Widen(_mm_srli_si128(lo, 8));
    q[2] = Widen(hi);
    q[3] = Widen(_mm_srli_si128(hi, 8));
    return _cvtsh_ss(blk->scale);
  }
};

// The fixed family's step for one quantized block and one (weight row, activation row) pair
// (PortableFixedBlockDot spells it out lane by lane).
LLM42_AVX2 inline __m256 BlockStep(const __m256 q[4], __m256 d, const float* xb, __m256 acc) {
  __m256 lo = _mm256_mul_ps(q[0], _mm256_loadu_ps(xb));
  lo = _mm256_fmadd_ps(q[1], _mm256_loadu_ps(xb + 8), lo);
  __m256 hi = _mm256_mul_ps(q[2], _mm256_loadu_ps(xb + 16));
  hi = _mm256_fmadd_ps(q[3], _mm256_loadu_ps(xb + 24), hi);
  acc = _mm256_fmadd_ps(lo, d, acc);
  return _mm256_fmadd_ps(hi, d, acc);
}

// Quantized rows against NX activation rows, each block decoded once for all of them. kSplit
// (the fast family's lone row) adds hi into a second accumulator, halving the loop-carried
// chain, so its bits differ from the grouped and fixed ones.
template <typename B, int NX, bool kSplit>
LLM42_AVX2 void Avx2BlockDot(const uint8_t* w, const float* const* x, int64_t k, float* out) {
  static_assert(!kSplit || NX == 1);
  __m256 acc[NX], acc_hi = _mm256_setzero_ps();
  for (int j = 0; j < NX; ++j) acc[j] = _mm256_setzero_ps();
  for (int64_t b = 0; b < k / 32; ++b) {
    __m256 q[4];
    const __m256 d = _mm256_set1_ps(B::Decode(w, b, q));
    for (int j = 0; j < NX; ++j) {
      const float* xb = x[j] + 32 * b;
      if constexpr (kSplit) {
        __m256 lo = _mm256_mul_ps(q[0], _mm256_loadu_ps(xb));
        lo = _mm256_fmadd_ps(q[1], _mm256_loadu_ps(xb + 8), lo);
        __m256 hi = _mm256_mul_ps(q[2], _mm256_loadu_ps(xb + 16));
        hi = _mm256_fmadd_ps(q[3], _mm256_loadu_ps(xb + 24), hi);
        acc[0] = _mm256_fmadd_ps(lo, d, acc[0]);
        acc_hi = _mm256_fmadd_ps(hi, d, acc_hi);
      } else {
        acc[j] = BlockStep(q, d, xb, acc[j]);
      }
    }
  }
  for (int j = 0; j < NX; ++j) out[j] = FixedTreeSum(kSplit ? _mm256_add_ps(acc[j], acc_hi) : acc[j]);
}

template <typename B, bool kFast>
LLM42_AVX2 void Avx2BlockRowDotT(const uint8_t* w, const float* const* x, int n_x, int64_t k, float* out) {
  switch (n_x) {
    case 1: return Avx2BlockDot<B, 1, kFast>(w, x, k, out);
    case 2: return Avx2BlockDot<B, 2, false>(w, x, k, out);
    case 3: return Avx2BlockDot<B, 3, false>(w, x, k, out);
    default: return Avx2BlockDot<B, 4, false>(w, x, k, out);
  }
}

// The tile and the 4-row GEMV of the fixed family for quantized rows.
template <typename B>
LLM42_AVX2 void Avx2BlockTile(const uint8_t* w0, const uint8_t* w1, const float* const* x, int64_t k,
                              float* out) {
  __m256 acc[4][2];
  for (int j = 0; j < 4; ++j) acc[j][0] = acc[j][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < k / 32; ++b) {
    __m256 q0[4], q1[4];
    const __m256 d0 = _mm256_set1_ps(B::Decode(w0, b, q0)), d1 = _mm256_set1_ps(B::Decode(w1, b, q1));
    for (int j = 0; j < 4; ++j) {
      acc[j][0] = BlockStep(q0, d0, x[j] + 32 * b, acc[j][0]);
      acc[j][1] = BlockStep(q1, d1, x[j] + 32 * b, acc[j][1]);
    }
  }
  for (int j = 0; j < 4; ++j) {
    out[j * 2] = FixedTreeSum(acc[j][0]);
    out[j * 2 + 1] = FixedTreeSum(acc[j][1]);
  }
}

template <typename B>
LLM42_AVX2 void Avx2BlockGemv4(const uint8_t* const* w, const float* x, int64_t k, float* out) {
  __m256 acc[4];
  for (int r = 0; r < 4; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < k / 32; ++b) {
    for (int r = 0; r < 4; ++r) {
      __m256 q[4];
      const __m256 d = _mm256_set1_ps(B::Decode(w[r], b, q));
      acc[r] = BlockStep(q, d, x + 32 * b, acc[r]);
    }
  }
  for (int r = 0; r < 4; ++r) out[r] = FixedTreeSum(acc[r]);
}

template <typename V, typename L>
LLM42_AVX2 void Avx2RowDotT(const uint8_t* w, const float* const* x, int n_x, int64_t k, float* out) {
  switch (n_x) {
    case 1: return Avx2Dot<V, L, 1, 4>(w, x, k, out);
    case 2: return Avx2Dot<V, L, 2, 2>(w, x, k, out);
    case 3: return Avx2Dot<V, L, 3, 2>(w, x, k, out);
    default: return Avx2Dot<V, L, 4, 2>(w, x, k, out);
  }
}
#endif  // LLM42_X86

bool SimdDisabledByEnvironment() {
  const char* v = std::getenv("LLM42_CPU_SIMD");
  return v != nullptr && (std::strcmp(v, "off") == 0 || std::strcmp(v, "0") == 0);
}

}  // namespace

bool CpuHasAvx2() {
#if LLM42_X86
  // LLM42_CPU_SIMD=off forces the portable kernels process-wide (to compare machines, and for
  // the test that reruns a generation as an AVX2-less machine would).
  static const bool has = !SimdDisabledByEnvironment() && __builtin_cpu_supports("avx2") &&
                          __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  return has;
#else
  return false;
#endif
}

namespace {

template <template <typename> class Portable>
RowDotFn PortableFor(GgmlType type) {
  switch (type) {
    case GgmlType::kF32: return Portable<F32Loader>::fn;
    case GgmlType::kF16: return Portable<F16Loader>::fn;
    case GgmlType::kBF16: return Portable<Bf16Loader>::fn;
    case GgmlType::kQ8_0: return Portable<Q8_0Loader>::fn;
    case GgmlType::kQ4_0: return Portable<Q4_0Loader>::fn;
    default: return nullptr;
  }
}
template <typename L>
struct PortableFast {
  static constexpr RowDotFn fn = PortableRowDotT<L>;
};
template <typename L>
struct PortableFixed {
  static constexpr RowDotFn fn = PortableFixedRowDotT<L>;
};

#if LLM42_X86
// A weight type's AVX2 loader pair, as a tag for the kernel templates.
template <typename Vec, typename Loader>
struct Avx2Types {
  using V = Vec;
  using L = Loader;
};
// A quantized type's block decoder: its kernels are the Avx2Block* ones.
template <typename Block>
struct Avx2BlockTypes {
  using B = Block;
};
template <typename T>
inline constexpr bool kIsBlockType = false;
template <typename Block>
inline constexpr bool kIsBlockType<Avx2BlockTypes<Block>> = true;

// The AVX2 kernel `pick` instantiates for `type` (nullptr for types without kernels or CPUs
// without AVX2/FMA/F16C).
template <typename Fn, typename Pick>
Fn Avx2ByType(GgmlType type, Pick pick) {
  if (!CpuHasAvx2()) return nullptr;
  switch (type) {
    case GgmlType::kF32: return pick(Avx2Types<F32Vec, F32Loader>{});
    case GgmlType::kF16: return pick(Avx2Types<F16Vec, F16Loader>{});
    case GgmlType::kBF16: return pick(Avx2Types<Bf16Vec, Bf16Loader>{});
    case GgmlType::kQ8_0: return pick(Avx2BlockTypes<Q8_0Block>{});
    case GgmlType::kQ4_0: return pick(Avx2BlockTypes<Q4_0Block>{});
    default: return nullptr;
  }
}
#endif

}  // namespace

void DequantizeRow(GgmlType type, const uint8_t* row, int64_t n, float* out) {
  auto run = [&](auto loader) {
    for (int64_t i = 0; i < n; ++i) out[i] = decltype(loader)::At(row, i);
  };
  switch (type) {
    case GgmlType::kF32: return run(F32Loader{});
    case GgmlType::kF16: return run(F16Loader{});
    case GgmlType::kBF16: return run(Bf16Loader{});
    case GgmlType::kQ8_0: return run(Q8_0Loader{});
    case GgmlType::kQ4_0: return run(Q4_0Loader{});
    default: std::memset(out, 0, static_cast<size_t>(n) * sizeof(float));
  }
}

Gemv4Fn SelectFixedGemv4(GgmlType type, bool allow_simd) {
#if LLM42_X86
  if (allow_simd) {
    return Avx2ByType<Gemv4Fn>(type, [](auto t) -> Gemv4Fn {
      using T = decltype(t);
      if constexpr (kIsBlockType<T>) {
        return Avx2BlockGemv4<typename T::B>;
      } else {
        return Avx2Gemv4<typename T::V, typename T::L>;
      }
    });
  }
#endif
  (void)type;
  return nullptr;
}

Gemv4Fn SelectFixedGemv16(GgmlType type, bool allow_simd) {
#if LLM42_X86
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");
  if (allow_simd && has) {
    return Avx2ByType<Gemv4Fn>(type, [](auto t) -> Gemv4Fn {
      using T = decltype(t);
      if constexpr (kIsBlockType<T>) {
        return nullptr;
      } else {
        return WideGemv<typename T::V, typename T::L, kWideGemvRows>;
      }
    });
  }
#endif
  (void)type;
  (void)allow_simd;
  return nullptr;
}

TileDotFn SelectTileDot(GgmlType type, bool allow_simd) {
#if LLM42_X86
  if (allow_simd) {
    return Avx2ByType<TileDotFn>(type, [](auto t) -> TileDotFn {
      using T = decltype(t);
      if constexpr (kIsBlockType<T>) {
        return Avx2BlockTile<typename T::B>;
      } else {
        return Avx2Tile<typename T::V, typename T::L>;
      }
    });
  }
#endif
  (void)type;
  return nullptr;
}

RowDotFn SelectRowDot(GgmlType type, DotFamily family, bool allow_simd) {
#if LLM42_X86
  if (allow_simd && CpuHasAvx2()) {
    const bool fixed = family == DotFamily::kFixed;
    return Avx2ByType<RowDotFn>(type, [fixed](auto t) -> RowDotFn {
      using T = decltype(t);
      if constexpr (kIsBlockType<T>) {
        return fixed ? Avx2BlockRowDotT<typename T::B, false> : Avx2BlockRowDotT<typename T::B, true>;
      } else {
        return fixed ? Avx2FixedRowDotT<typename T::V, typename T::L> : Avx2RowDotT<typename T::V, typename T::L>;
      }
    });
  }
#endif
  return family == DotFamily::kFixed ? PortableFor<PortableFixed>(type) : PortableFor<PortableFast>(type);
}

}  // namespace llm42::internal
