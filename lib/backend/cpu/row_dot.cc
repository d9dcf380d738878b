#include "lib/backend/cpu/row_dot.h"

#include "lib/backend/cpu/format_gemv.h"
#include "lib/backend/cpu/int8_dot.h"
#include "lib/backend/cpu/fixed_tree.h"
#include "lib/backend/cpu/weight_loaders.h"
#include "lib/numerics/portable_math.h"
#include "lib/util/simd_switch.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__)
#include <cpuid.h>

#include "lib/backend/cpu/simd_targets.h"
#endif





namespace llm42::internal {
namespace {

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
    for (int l = 0; l < 8; ++l) acc[l] = PortableFmaf(L::At(w, i + l), x[i + l], acc[l]);
  }
  float s = FixedTreeSum(acc);
  for (; i < k; ++i) s = PortableFmaf(L::At(w, i), x[i], s);
  return s;
}

template <typename L>
void PortableFixedRowDotT(const uint8_t* w, const float* const* x, int n_x, int64_t k, float* out) {
  for (int j = 0; j < n_x; ++j) {
    out[j] = PortableFixedDot<L>(w, x[j], k);
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
    for (int64_t t = i; t < k; ++t) s = PortableFmaf(L::At(w, t), x[j][t], s);
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
      s0 = PortableFmaf(L::At(w0, t), x[j][t], s0);
      s1 = PortableFmaf(L::At(w1, t), x[j][t], s1);
    }
    out[j * 2] = s0;
    out[j * 2 + 1] = s1;
  }
}

// One accumulator per (weight row, activation row) pair, whatever the grouping: the fixed
// family (row_dot.h). The tile above and GemvRowsBody below (U = 1) run the same per-pair arithmetic.
template <typename V, typename L>
LLM42_AVX2 void Avx2FixedRowDotT(const uint8_t* w, const float* const* x, int n_x, int64_t k, float* out) {
  switch (n_x) {
    case 1: return Avx2Dot<V, L, 1, 1>(w, x, k, out);
    case 2: return Avx2Dot<V, L, 2, 1>(w, x, k, out);
    case 3: return Avx2Dot<V, L, 3, 1>(w, x, k, out);
    default: return Avx2Dot<V, L, 4, 1>(w, x, k, out);
  }
}

// R weight rows at once against one activation row, U accumulators per row over alternate
// 8-element steps, added in order before the fixed tree. U = 1 is the fixed family's arithmetic;
// U = 2 the fast family's decode kernel (different bits). The body of GemvRows (AVX-512VL: its 32
// registers hold R = 16 chains) and GemvRowsAvx2. Rows are those of one matrix, one after
// another (w[r] + R * row bytes is the next group's row r), which the prefetch relies on.
template <typename V, typename L, int R, int U>
LLM42_AVX2 __attribute__((always_inline)) inline void GemvRowsBody(const uint8_t* const* w, const float* x, int64_t k,
                                                                   float* out) {
  constexpr int64_t kLine = 64 / V::kBytes;  // elements per cache line
  // One row: kStreamPrefetchBytes ahead of itself, twice that with U > 1 (two chains outrun a
  // one-chain loop: llama-110m on a Zen 3, fast GEMVs alone, three alternated rounds: f32
  // 12.3-14.5 -> 12.4-16.3 GB/s, tg64 30.4-31.1 -> 32.7-33.9 tok/s; f16 15.4-16.3 -> 15.5-18.7).
  // Several rows: the same place in the next group's rows, whatever the rows' length (a row's
  // own lead lands in rows this group is reading where rows are 4 KiB: f16 four rows, one
  // thread, from memory on a Zen 5, best of six, twice: k = 2048 14.5-17.8 -> 26.3-27.6 GB/s,
  // k = 4096 21.1-21.5 -> 26.0-31.5, k = 8192 23.1-24.4 -> 25.5-27.2).
  const int64_t ahead = R == 1 ? kStreamPrefetchBytes * (U > 1 ? 2 : 1) : R * k * V::kBytes;
  __m256 acc[R][U];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
    for (int u = 0; u < U; ++u) acc[r][u] = _mm256_setzero_ps();
  }
  int64_t i = 0;
  for (; i + 8 * U <= k; i += 8 * U) {
    if (i % kLine == 0) {
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) _mm_prefetch(reinterpret_cast<const char*>(w[r] + ahead + i * V::kBytes), _MM_HINT_T0);
    }
#pragma GCC unroll 2
    for (int u = 0; u < U; ++u) {
      const __m256 xv = _mm256_loadu_ps(x + i + 8 * u);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[r][u] = _mm256_fmadd_ps(V::Load8(w[r], i + 8 * u), xv, acc[r][u]);
    }
  }
  for (; i + 8 <= k; i += 8) {
    const __m256 xv = _mm256_loadu_ps(x + i);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) acc[r][0] = _mm256_fmadd_ps(V::Load8(w[r], i), xv, acc[r][0]);
  }
  for (int r = 0; r < R; ++r) {
    for (int u = 1; u < U; ++u) acc[r][0] = _mm256_add_ps(acc[r][0], acc[r][u]);
    float s = FixedTreeSum(acc[r][0]);
    for (int64_t t = i; t < k; ++t) s = PortableFmaf(L::At(w[r], t), x[t], s);
    out[r] = s;
  }
}
// The R rows of group g of consecutive rows from w (GemvFn's layout).
template <int R>
inline void GroupRows(const uint8_t* w, size_t row_bytes, int64_t g, const uint8_t* (&rows)[R]) {
  for (int r = 0; r < R; ++r) rows[r] = w + static_cast<size_t>(g + r) * row_bytes;
}
// GemvRowsBody over consecutive rows in groups of R (GemvFn), compiled into each target below.
template <typename V, typename L, int R, int U>
LLM42_AVX2 __attribute__((always_inline)) inline void GemvRowGroups(const uint8_t* w, size_t row_bytes,
                                                                    int64_t n_rows, const float* x, int64_t k,
                                                                    float* out) {
  for (int64_t g = 0; g < n_rows; g += R) {
    const uint8_t* rows[R];
    GroupRows(w, row_bytes, g, rows);
    GemvRowsBody<V, L, R, U>(rows, x, k, out + g);
  }
}
template <typename V, typename L, int R, int U>
LLM42_AVX2 void GemvRowsAvx2(const uint8_t* w, size_t row_bytes, int64_t n_rows, const float* x, int64_t k,
                             float* out) {
  GemvRowGroups<V, L, R, U>(w, row_bytes, n_rows, x, k, out);
}

// fast decode on 512-bit registers: R weight rows against one activation row, U 16-lane
// accumulators per row over alternate 16-element steps, one conversion per 16 weights; its own
// bits (the accumulators added in order, the lanes in _mm512_reduce_add_ps's order, then the tail).
template <typename L, int R, int U>
LLM42_AVX512 __attribute__((always_inline)) inline void GemvRows512Body(const uint8_t* const* w, const float* x,
                                                                       int64_t k, float* out) {
  __m512 acc[R][U];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int u = 0; u < U; ++u) acc[r][u] = _mm512_setzero_ps();
  }
  int64_t i = 0;
  for (; i + 16 * U <= k; i += 16 * U) {
#pragma GCC unroll 4
    for (int u = 0; u < U; ++u) {
      const __m512 xv = _mm512_loadu_ps(x + i + 16 * u);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r][u] = _mm512_fmadd_ps(Load16<L>(w[r], i + 16 * u), xv, acc[r][u]);
    }
  }
  for (; i + 16 <= k; i += 16) {
    const __m512 xv = _mm512_loadu_ps(x + i);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r][0] = _mm512_fmadd_ps(Load16<L>(w[r], i), xv, acc[r][0]);
  }
  for (int r = 0; r < R; ++r) {
    for (int u = 1; u < U; ++u) acc[r][0] = _mm512_add_ps(acc[r][0], acc[r][u]);
    float s = _mm512_reduce_add_ps(acc[r][0]);
    for (int64_t t = i; t < k; ++t) s = PortableFmaf(L::At(w[r], t), x[t], s);
    out[r] = s;
  }
}
template <typename L, int R, int U>
LLM42_AVX512 void GemvRows512(const uint8_t* w, size_t row_bytes, int64_t n_rows, const float* x, int64_t k,
                              float* out) {
  for (int64_t g = 0; g < n_rows; g += R) {
    const uint8_t* rows[R];
    GroupRows(w, row_bytes, g, rows);
    GemvRows512Body<L, R, U>(rows, x, k, out + g);
  }
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

#if LLM42_X86
// F16C: CPUID leaf 1, ECX bit 29 (clang 14's __builtin_cpu_supports does not know "f16c").
bool CpuHasF16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & (1u << 29)) != 0;
}
#endif  // LLM42_X86

}  // namespace

bool CpuHasAvx2() {
#if LLM42_X86
  // LLM42_CPU_SIMD=off forces the portable kernels process-wide (to compare machines, and for
  // the test that reruns a generation as an AVX2-less machine would).
  static const bool has = !SimdDisabledByEnvironment() && __builtin_cpu_supports("avx2") &&
                          __builtin_cpu_supports("fma") && CpuHasF16c();
  return has;
#else
  return false;
#endif
}

bool CpuHasAvx512() {
#if LLM42_X86
  static const bool has = CpuHasAvx2() && !SimdCappedAtAvx2() && __builtin_cpu_supports("avx512f") &&
                          __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  return has;
#else
  return false;
#endif
}

#if LLM42_X86
namespace {
// The AVX-512 kernels that need BW and one more extension (`extension`: the CPU's own answer).
bool Avx512BwAnd(bool extension) { return CpuHasAvx512() && __builtin_cpu_supports("avx512bw") && extension; }
}  // namespace

bool CpuHasVnni512() {
  static const bool has = Avx512BwAnd(__builtin_cpu_supports("avx512vnni"));
  return has;
}
bool CpuHasBf16Dot512() {
  static const bool has = Avx512BwAnd(__builtin_cpu_supports("avx512bf16"));
  return has;
}
#else
bool CpuHasVnni512() { return false; }
bool CpuHasBf16Dot512() { return false; }
#endif

namespace {

template <template <typename> class Portable>
RowDotFn PortableFor(GgmlType type) {
  RowDotFn fn = nullptr;
  WithElementLoader(type, [&](auto l) { fn = Portable<decltype(l)>::fn; });
  return fn;
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
// The AVX2 kernel `pick` instantiates for `type` (nullptr for q8_0 and q4_0, whose AVX2 kernels
// are int8_dot.h's, and for CPUs without AVX2/FMA/F16C).
template <typename Fn, typename Pick>
Fn Avx2ByType(GgmlType type, Pick pick) {
  if (!CpuHasAvx2() || IsInt8Type(type)) return nullptr;
  Fn fn = nullptr;
  WithElementLoader(type, [&](auto l) {
    using L = decltype(l);
    if constexpr (kFloatKernels<L>) fn = pick(Avx2Types<VecOf<L>, L>{});
  });
  return fn;
}
#endif

}  // namespace

bool DequantizeRow(GgmlType type, const uint8_t* row, int64_t n, float* out) {
  const bool known = WithElementLoader(type, [&](auto loader) {
    for (int64_t i = 0; i < n; ++i) out[i] = decltype(loader)::At(row, i);
  });
  if (!known) std::memset(out, 0, static_cast<size_t>(n) * sizeof(float));
  return known;
}

WideGemv SelectFixedGemv4(GgmlType type, bool allow_simd) {
  if (IsFormatType(type)) return SelectFormatGemv(type, DotFamily::kFixed, allow_simd);
#if LLM42_X86
  if (allow_simd) {
    const GemvFn fn = Avx2ByType<GemvFn>(type, [](auto t) -> GemvFn {
      using T = decltype(t);
      return GemvRowsAvx2<typename T::V, typename T::L, 4, 1>;
    });
    if (fn != nullptr) return {fn, 4};
  }
#endif
  (void)type;
  return {};
}

WideGemv SelectWideGemv(GgmlType type, DotFamily family, bool allow_simd, int64_t row_bytes) {
  if (IsFormatType(type)) return SelectFormatGemv(type, family, allow_simd);
#if LLM42_X86
  const bool fixed = family == DotFamily::kFixed;
  const bool avx512 = allow_simd && CpuHasAvx512();
  const bool long_rows = row_bytes >= kStreamPrefetchBytes;
  // fast's long rows on AVX-512: 16-lane accumulators (other bits), f32 eight rows at a time, f16
  // and bf16 one (two threads, from memory, best of six, three rounds on a Zen 5: f32 k = 2048
  // 38-42 GB/s against the four-row kernel's 33-39, f16 k = 4096 29-44 against 33-36).
  if (avx512 && long_rows && !fixed) {
    const GemvFn fn = Avx2ByType<GemvFn>(type, [](auto t) -> GemvFn {
      using L = typename decltype(t)::L;
      return std::is_same_v<L, F32Loader> ? GemvRows512<L, 8, 2> : GemvRows512<L, 1, 2>;
    });
    if (fn != nullptr) return {fn, type == GgmlType::kF32 ? 8 : 1};
  }
  // Four rows at a time with the fixed arithmetic (one chain each; a lone chain waits on each
  // fused multiply-add, which holds a core below its share of the bandwidth): other long rows,
  // both families (AVX2 on a Zen 3, f16, two threads, best of three: 8192 x 2048 fixed 19.8-20.1
  // -> 26.2-32.0 GB/s, fast's two chains 19.0-28.9 against 22.3-32.0, four rows with two chains
  // each 20.9), and every fixed row where the CPU has AVX-512 (on a Zen 5, two threads, from
  // memory, best of six, three rounds, against the 256-bit sixteen-row kernel it replaces: f32
  // k = 768 33-36 -> 34-39 GB/s, k = 2048 20-31 -> 38-41; f16 34-37 -> 32-34 and 27.5-34 ->
  // 33-37; bf16 33-36 -> 32-37 and 30-34 -> 36-43; one thread, f16 k = 768, one row 22-23).
  if (allow_simd && (long_rows || (fixed && avx512))) return SelectFixedGemv4(type, allow_simd);
  // Otherwise one row at a time, a single stream read ahead (kStreamPrefetchBytes); fixed with
  // its one chain per row, fast with two (llama-110m f16 on a Zen 3, GEMVs alone, alternated
  // rounds: fixed 7.7-11.6 GB/s with eight interleaved rows -> 11.6-14.9, fast 9.6-11.8 with the
  // row dot's four accumulators -> 11.9-15.4; at 24576 x 768 one row 22.0-23.4 against four
  // 18.8-20.3). On a Zen 5 (one thread, from memory, best of six, two rounds, k = 768) fast's two
  // 8-lane chains beat 16-lane ones: f32 29-37 GB/s against 21-23 (eight rows), f16 30-36 against
  // 28-30 (one row), bf16 32-33 against 28-31.
  if (allow_simd) {
    const GemvFn fn = Avx2ByType<GemvFn>(type, [fixed](auto t) -> GemvFn {
      using T = decltype(t);
      return fixed ? GemvRowsAvx2<typename T::V, typename T::L, 1, 1> : GemvRowsAvx2<typename T::V, typename T::L, 1, 2>;
    });
    if (fn != nullptr) return {fn, 1};
  }
#endif
  (void)type;
  (void)family;
  (void)allow_simd;
  (void)row_bytes;
  return {};
}

TileDotFn SelectTileDot(GgmlType type, bool allow_simd) {
#if LLM42_X86
  if (allow_simd) {
    return Avx2ByType<TileDotFn>(type, [](auto t) -> TileDotFn {
      using T = decltype(t);
      return Avx2Tile<typename T::V, typename T::L>;
    });
  }
#endif
  (void)type;
  return nullptr;
}

RowDotFn SelectRowDot(GgmlType type, DotFamily family, bool allow_simd) {
  const bool fixed = family == DotFamily::kFixed;
  if (fixed && IsInt8Type(type)) return nullptr;  // int8_dot.h defines their fixed arithmetic
#if LLM42_X86
  if (allow_simd) {
    const RowDotFn simd = Avx2ByType<RowDotFn>(type, [fixed](auto t) -> RowDotFn {
      using T = decltype(t);
      return fixed ? Avx2FixedRowDotT<typename T::V, typename T::L> : Avx2RowDotT<typename T::V, typename T::L>;
    });
    if (simd != nullptr) return simd;
  }
#endif
  return fixed ? PortableFor<PortableFixed>(type) : PortableFor<PortableFast>(type);
}

}  // namespace llm42::internal
