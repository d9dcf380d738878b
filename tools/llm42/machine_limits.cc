#include "tools/llm42/machine_limits.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <vector>

#include "lib/util/thread_pool.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "lib/backend/cpu/weight_loaders.h"
#endif

namespace llm42::cli {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

#if defined(__x86_64__)
constexpr int kChains = 12;  // independent accumulators: FMA latency 4 x 2 pipes, with room
constexpr long kIterations = 20'000'000;

__attribute__((target("avx2,fma"))) float FmaLoop256(float seed) {
  __m256 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(seed + static_cast<float>(c));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (long i = 0; i < kIterations; ++i) {
#pragma GCC unroll 16  // the chains stay in registers only when unrolled (GCC keeps the array in memory otherwise)
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
  }
  __m256 s = acc[0];
  for (int c = 1; c < kChains; ++c) s = _mm256_add_ps(s, acc[c]);
  return _mm256_cvtss_f32(s);
}

// The 512-bit loops' chains from the seed, and their lanes added up at the end (so that the
// work is kept).
__attribute__((target("avx512f"), always_inline)) inline void Seed512(float seed, __m512 (&acc)[kChains]) {
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(seed + static_cast<float>(c));
}
__attribute__((target("avx512f"), always_inline)) inline float Total512(const __m512 (&acc)[kChains]) {
  __m512 s = acc[0];
  for (int c = 1; c < kChains; ++c) s = _mm512_add_ps(s, acc[c]);
  float lanes[16];
  _mm512_storeu_ps(lanes, s);
  float total = 0;
  for (float f : lanes) total += f;
  return total;
}

__attribute__((target("avx512f"))) float FmaLoop512(float seed) {
  __m512 acc[kChains];
  Seed512(seed, acc);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (long i = 0; i < kIterations; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  }
  return Total512(acc);
}

// vdpbf16ps (AVX-512 BF16): two bf16 products and their sum added into each f32 lane, the
// fast schedule's bf16 prompt GEMMs (bf16_gemm.h). Four FLOPs per lane.
__attribute__((target("avx512f,avx512bf16"))) float Bf16DotLoop(float seed) {
  __m512 acc[kChains];
  Seed512(seed, acc);
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.5f), _mm512_set1_ps(0.25f));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-7f), _mm512_set1_ps(1e-7f));
  for (long i = 0; i < kIterations; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
  }
  return Total512(acc);
}
#endif

// A streaming read that the core cannot be the limit of: eight independent vector additions per
// 256 bytes where the CPU has AVX2 (a scalar loop ran below the decode kernels' own read rate);
// with or without the decode kernels' software prefetch (weight_loaders.h). Passes run both and
// the best counts, so the floor is at least what either way of reading reaches: on a Zen 3 the
// prefetched stream read less than the plain one in some runs (15 against 20-22 GB/s), while the
// prefetching GEMVs read more than the plain stream in others.
#if defined(__x86_64__)
template <bool kPrefetch>
__attribute__((target("avx2"))) float SumFloatsAvx2(const float* p, size_t n) {
  __m256 acc[8];
  for (auto& a : acc) a = _mm256_setzero_ps();
  size_t i = 0;
  constexpr size_t kAhead = internal::kStreamPrefetchBytes / sizeof(float);
  for (; i + 64 <= n; i += 64) {
    if constexpr (kPrefetch) internal::PrefetchSpan(reinterpret_cast<const uint8_t*>(p + i + kAhead), 64 * sizeof(float));
#pragma GCC unroll 8  // the accumulators stay in registers only when unrolled
    for (int c = 0; c < 8; ++c) acc[c] = _mm256_add_ps(acc[c], _mm256_loadu_ps(p + i + 8 * c));
  }
  for (int c = 1; c < 8; ++c) acc[0] = _mm256_add_ps(acc[0], acc[c]);
  float lanes[8];
  _mm256_storeu_ps(lanes, acc[0]);
  float s = 0;
  for (float l : lanes) s += l;
  for (; i < n; ++i) s += p[i];
  return s;
}
#endif

float SumFloats(const float* p, size_t n, bool prefetch) {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2")) return prefetch ? SumFloatsAvx2<true>(p, n) : SumFloatsAvx2<false>(p, n);
#endif
  (void)prefetch;
  float acc[16] = {};
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int l = 0; l < 16; ++l) acc[l] += p[i + static_cast<size_t>(l)];
  }
  float s = 0;
  for (float a : acc) s += a;
  for (; i < n; ++i) s += p[i];
  return s;
}

}  // namespace

// Best of a few passes of a multi-threaded streaming read over 1 GiB, alternately plain and
// prefetched.
double MeasureReadBandwidth(int threads) {
  const size_t n = (size_t{1} << 30) / sizeof(float);
  std::vector<float> buf(n, 1.0f);
  ThreadPool pool(threads);
  double best = 0;
  for (int pass = 0; pass < 6; ++pass) {
    std::vector<float> sums(static_cast<size_t>(threads), 0);
    const auto t0 = Clock::now();
    pool.RunOnAll([&](int t) {
      const size_t begin = n * static_cast<size_t>(t) / static_cast<size_t>(threads);
      const size_t end = n * static_cast<size_t>(t + 1) / static_cast<size_t>(threads);
      sums[static_cast<size_t>(t)] = SumFloats(buf.data() + begin, end - begin, pass % 2 == 1);
    });
    const double s = Seconds(t0, Clock::now());
    if (sums[0] < 0) std::cerr << "";  // keep the reads
    best = std::max(best, static_cast<double>(n * sizeof(float)) / s);
  }
  return best;
}

#if defined(__x86_64__)
namespace {

// FLOP/s of `loop` (flops_per_lane FLOPs per lane and instruction, `lanes` lanes) on `threads`
// threads, the best of three passes.
template <typename Loop>
double MeasurePeak(int threads, Loop loop, double flops_per_lane, int lanes) {
  ThreadPool pool(threads);
  std::atomic<int> sink{0};
  double best = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const auto t0 = Clock::now();
    pool.RunOnAll([&](int t) {
      if (loop(static_cast<float>(t)) == 12345.0f) sink.fetch_add(1);
    });
    const double s = Seconds(t0, Clock::now());
    const double flops = flops_per_lane * lanes * kChains * static_cast<double>(kIterations) * threads;
    best = std::max(best, flops / s);
  }
  return best;
}

}  // namespace
#endif

double MeasureFmaPeak(int threads, int bits) {
#if defined(__x86_64__)
  if (bits == 512 ? !__builtin_cpu_supports("avx512f") : !__builtin_cpu_supports("fma")) return 0;
  return MeasurePeak(threads, bits == 512 ? FmaLoop512 : FmaLoop256, 2, bits / 32);
#else
  (void)threads, (void)bits;
  return 0;
#endif
}

double MeasureBf16DotPeak(int threads) {
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bf16")) return 0;
  return MeasurePeak(threads, Bf16DotLoop, 4, 16);
#else
  (void)threads;
  return 0;
#endif
}

}  // namespace llm42::cli
