#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "lib/backend/cpu/attention.h"
#include "lib/backend/cpu/bf16_gemm.h"
#include "lib/backend/cpu/blas_gemm.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/backend/cpu/int8_dot.h"
#include "lib/backend/cpu/int8_gemm.h"
#include "lib/backend/cpu/kquant_gemv.h"
#include "lib/backend/cpu/round_row.h"
#include "lib/backend/cpu/sum_squares.h"
#include "lib/backend/cpu/packed_gemm.h"
#include "lib/backend/cpu/quant_formats.h"
#include "lib/backend/cpu/row_dot.h"
#include "lib/backend/cpu/row_ops.h"
#include "lib/maker/quantizer.h"
#include "lib/util/ggml_types.h"
#include "lib/numerics/portable_math.h"
#include "lib/util/simd_switch.h"
#include "tests/backend_harness.h"
#include "tests/op_reference.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace llm42 {
namespace {

// Why this machine has no AVX2 kernels to test, read from the CPU itself and the environment, not
// from the library's detection: a CPU without AVX2, FMA or F16C, or LLM42_CPU_SIMD=off (which
// stands for one). Empty where the kernels must exist.
std::string NoAvx2Kernels() {
#if defined(__x86_64__)
  if (SimdDisabledByEnvironment()) return "LLM42_CPU_SIMD=off stands for a CPU without AVX2";
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") || !__builtin_cpu_supports("f16c")) {
    return "this CPU lacks AVX2/FMA/F16C";
  }
  return "";
#else
  return "not an x86-64 build";
#endif
}

// Skips (saying why and what is then missing) only for a missing CPU feature; where the CPU has
// it, a library that does not detect it fails instead of skipping.
#define SKIP_WITHOUT_AVX2_KERNELS(what)                                                          \
  if (const std::string why = NoAvx2Kernels(); !why.empty()) GTEST_SKIP() << why << ": " << what; \
  ASSERT_TRUE(internal::CpuHasAvx2()) << "the CPU has AVX2, FMA and F16C but the library does not detect them"

// Why this machine has no AVX-512 kernels of one extension to test (VNNI: int8_gemm.h; BF16:
// bf16_gemm.h), read the same way: no AVX2 kernels at all, LLM42_CPU_SIMD=avx2 (which stands for
// a CPU with AVX2 only), or a CPU without one of AVX-512 F, DQ, VL, BW and the extension
// (`has_extension`, the CPU's own answer, named `extension`). Empty where the kernels must exist.
std::string NoAvx512Kernels(bool has_extension, const char* extension) {
  if (std::string why = NoAvx2Kernels(); !why.empty()) return why;
#if defined(__x86_64__)
  if (SimdCappedAtAvx2()) return "LLM42_CPU_SIMD=avx2 stands for a CPU with AVX2 only";
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512dq") ||
      !__builtin_cpu_supports("avx512vl") || !__builtin_cpu_supports("avx512bw") || !has_extension) {
    return absl::StrCat("this CPU lacks AVX-512 F/DQ/VL/BW/", extension);
  }
#else
  (void)has_extension, (void)extension;
#endif
  return "";
}
#if defined(__x86_64__)
#define CPU_SUPPORTS(feature) __builtin_cpu_supports(feature)
#else
#define CPU_SUPPORTS(feature) false
#endif
std::string NoVnni512Kernels() { return NoAvx512Kernels(CPU_SUPPORTS("avx512vnni"), "VNNI"); }
std::string NoBf16Dot512Kernels() { return NoAvx512Kernels(CPU_SUPPORTS("avx512bf16"), "BF16"); }

#if defined(__x86_64__)
__attribute__((target("f16c"))) uint16_t HardwareFp16(float f) {
  return static_cast<uint16_t>(_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(f), 0), 0));
}
#endif

TEST(Fp16, ConversionsRoundTripEveryHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = Fp16ToFp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(Fp32ToFp16(f), h) << std::hex << h;
  }
}

TEST(Fp16, MatchesF16cInstructionsBitForBit) {
#if defined(__x86_64__)
  // The instruction itself, whatever LLM42_CPU_SIMD says: only a CPU without F16C lacks it.
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "this CPU lacks F16C: no hardware conversion to compare with";
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-70000.0f, 70000.0f);
  for (int i = 0; i < 200000; ++i) {
    float f = dist(rng) * std::pow(2.0f, static_cast<float>(static_cast<int>(rng() % 40) - 30));
    ASSERT_EQ(Fp32ToFp16(f), HardwareFp16(f)) << f;
  }
#else
  GTEST_SKIP() << "not an x86-64 build";
#endif
}

// The block types of quant_formats.h: every weight the library decodes (DequantizeRow, scalar;
// the AVX2 loaders give the same values, FixedIsRowInvariantAndSimdIndependent) equals the
// definition walked as ggml's dequantization loops walk a block (quant_reference.h), over random
// blocks of every bit pattern. Fails with a layout index off (tried: Q6_K's ql byte without its
// 32 (t mod 2), Q3_K's hmask bit without its 4h, IQ4_XS's scales_h shifted by s instead of 2s).
TEST(BlockTypes, DecodingMatchesTheWrittenOutDefinitions) {
  std::mt19937 rng(5);
  for (GgmlType type : testing::FormatTypes()) {
    const GgmlTypeInfo info = *GetGgmlTypeInfo(static_cast<uint32_t>(type));
    const int64_t n_blocks = 64;
    const std::vector<uint8_t> bytes = testing::RandomBlocks(type, n_blocks, rng, testing::UnitScale(type));
    std::vector<float> ours(static_cast<size_t>(n_blocks * info.block_size)), ref(ours.size());
    ASSERT_TRUE(internal::DequantizeRow(type, bytes.data(), n_blocks * info.block_size, ours.data()));
    for (int64_t b = 0; b < n_blocks; ++b) {
      testing::ReferenceDequantizeBlock(type, bytes.data() + b * info.block_bytes, ref.data() + b * info.block_size);
    }
    for (size_t i = 0; i < ours.size(); ++i) ASSERT_EQ(ours[i], ref[i]) << info.name << " element " << i;
  }
}

// make-model's MXFP4 (lib/maker/quantizer.h) as ggml's quantize_row_mxfp4_ref: each block's E8M0
// exponent floor(log2(max |x|)) - 2 + 127 (taken here in double), each value the nearest of the
// doubled E2M1 grid times 2^(e - 128): within half the grid's widest gap (2 steps of d), or above its
// largest value 12 d (E2M1's 6) and below 16 d (the exponent's bound), clipped: within 4 d.
TEST(BlockTypes, Mxfp4QuantizationIsGgmls) {
  std::mt19937 rng(39);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  std::vector<float> x(32 * 64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = dist(rng) * (i % 64 < 32 ? 1.0f : 0.01f);
  const std::vector<uint8_t> bytes = Quantize(x, GgmlType::kMXFP4);
  ASSERT_EQ(bytes.size(), 64 * sizeof(BlockMXFP4));
  std::vector<float> back(x.size());
  for (size_t b = 0; b < 64; ++b) {
    float amax = 0;
    for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * b + j]));
    EXPECT_EQ(bytes[b * sizeof(BlockMXFP4)], static_cast<int>(std::floor(std::log2(static_cast<double>(amax)))) - 2 + 127)
        << "block " << b;
    testing::ReferenceDequantizeBlock(GgmlType::kMXFP4, bytes.data() + b * sizeof(BlockMXFP4), back.data() + 32 * b);
    const float d = std::ldexp(1.0f, bytes[b * sizeof(BlockMXFP4)] - 128);
    for (size_t j = 0; j < 32; ++j) EXPECT_LE(std::fabs(back[32 * b + j] - x[32 * b + j]), 4 * d) << "block " << b;
  }
}

// fast's Q4_K, Q5_K, Q6_K, IQ4_XS and MXFP4 decode GEMV (kquant_gemv.h) on AVX-512 VNNI (MXFP4 on
// rows that end in a partial activation record and an odd block). The activation rounding
// first: every value within half a step of x, and the sums of 16 those of the bytes. Then the
// GEMV against the product, in float64, of the written-out weights (quant_reference.h) and the
// rounded activations (q * d): equal up to f32 accumulation; and within the rounding's bound
// (sum of |w| * d / 2) of the product with x itself. Fails with a sub-block's scale taken from its
// neighbour, the Q6_K -32 dropped, Q5_K's fifth bit from the wrong sub-block, IQ4_XS's +128
// dropped, or MXFP4's negative weights taken as positive or a pair's second block given the first's
// scale (tried each).
TEST(KQuantGemv, IntegerProductsOfTheRoundedActivations) {
  // The kernels exist only for AVX-512 VNNI (elsewhere these types decode through format_gemv.h,
  // tested by the MatMul suite); the skip says which of the two reasons holds.
  if (!internal::KQuantGemvAvailable(GgmlType::kQ4_K)) {
#if LLM42_X86
    const bool cpu_has_it = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw");
#else
    const bool cpu_has_it = false;
#endif
    GTEST_SKIP() << (cpu_has_it ? "LLM42_CPU_SIMD caps SIMD below AVX-512 in this run" : "this CPU lacks AVX-512 VNNI")
                 << ": no integer k-quant GEMV to test (the float kernels decode these types here)";
  }
  std::mt19937 rng(11);
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kIQ4_XS, GgmlType::kMXFP4}) {
    ASSERT_TRUE(internal::KQuantGemvAvailable(type));
    const GgmlTypeInfo info = *GetGgmlTypeInfo(static_cast<uint32_t>(type));
    // MXFP4's rows need not be whole records: 91 blocks of 32 (gpt-oss's 2880 and one more, an odd
    // count) end in a partial record of 96 values.
    const int64_t block = info.block_size;
    const int64_t k = type == GgmlType::kMXFP4 ? 2912 : 3 * kSuperBlock, n_rows = 20, nb = k / block;
    const int64_t records = internal::Q8KRecords(k);
    const std::vector<uint8_t> w = testing::RandomBlocks(type, n_rows * nb, rng, testing::UnitScale(type));
    std::vector<float> x(static_cast<size_t>(k));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int64_t i = 0; i < k; ++i) x[static_cast<size_t>(i)] = normal(rng) * (i % 97 == 0 ? 20.0f : 1.0f);
    AlignedVector<internal::ActivationQ8K> act(static_cast<size_t>(records));
    internal::QuantizeQ8K(x.data(), k, act.data());
    std::vector<double> xq(static_cast<size_t>(k));
    for (int64_t b = 0; b < records; ++b) {
      const internal::ActivationQ8K& a = act[static_cast<size_t>(b)];
      for (int s = 0; s < 16; ++s) {
        int sum = 0;
        for (int i = 0; i < 16; ++i) sum += a.q[16 * s + i];
        ASSERT_EQ(a.bsums[s], sum) << info.name << " block " << b;
      }
      for (int i = 0; i < kSuperBlock; ++i) {
        const double v = static_cast<double>(a.q[i]) * a.d;
        const int64_t at = b * kSuperBlock + i;
        if (at >= k) {  // a partial record's padding
          ASSERT_EQ(a.q[i], 0) << info.name;
          continue;
        }
        ASSERT_LE(std::fabs(v - x[static_cast<size_t>(at)]), a.d * 0.5001) << info.name;
        xq[static_cast<size_t>(at)] = v;
      }
    }
    // The row among five copies of itself (one group of four, then one alone): the same result in
    // every place.
    std::vector<float> out(static_cast<size_t>(n_rows)), copies(static_cast<size_t>(4 * n_rows));
    const internal::ActivationQ8K* xs[5] = {act.data(), act.data(), act.data(), act.data(), act.data()};
    float* outs[5] = {copies.data(), copies.data() + n_rows, copies.data() + 2 * n_rows, copies.data() + 3 * n_rows,
                      out.data()};
    internal::KQuantGemv(type, w.data(), static_cast<size_t>(nb * info.block_bytes), n_rows, xs, 5, k, outs);
    for (size_t i = 0; i < copies.size(); ++i) ASSERT_EQ(copies[i], out[i % static_cast<size_t>(n_rows)]) << info.name;
    std::vector<float> row(static_cast<size_t>(k));
    for (int64_t r = 0; r < n_rows; ++r) {
      for (int64_t b = 0; b < nb; ++b) {
        testing::ReferenceDequantizeBlock(type, w.data() + (r * nb + b) * info.block_bytes, row.data() + b * block);
      }
      double dot_q = 0, dot_x = 0, magnitude = 0, bound = 0;
      for (int64_t i = 0; i < k; ++i) {
        const double wi = row[static_cast<size_t>(i)];
        dot_q += wi * xq[static_cast<size_t>(i)];
        dot_x += wi * x[static_cast<size_t>(i)];
        magnitude += std::fabs(wi * xq[static_cast<size_t>(i)]);
        bound += std::fabs(wi) * act[static_cast<size_t>(i / kSuperBlock)].d * 0.5001;
      }
      EXPECT_NEAR(out[static_cast<size_t>(r)], dot_q, magnitude * 1e-6 + 1e-30) << info.name << " row " << r;
      EXPECT_LE(std::fabs(out[static_cast<size_t>(r)] - dot_x), bound + magnitude * 1e-6) << info.name << " row " << r;
    }
  }
}

// Q4_K's scales and mins unpacked all at once (the integer GEMVs') equal the per-sub-block rule
// (ScaleMinK4, which DecodingMatchesTheWrittenOutDefinitions checks against ggml's loops).
TEST(BlockTypes, ScalesAndMinsAllAtOnceMatchOneAtATime) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20000; ++trial) {
    uint8_t q[12], sc[8], m[8];
    for (uint8_t& b : q) b = static_cast<uint8_t>(rng());
    internal::ScalesMinsK4(q, sc, m);
    for (int s = 0; s < 8; ++s) {
      int32_t want_sc, want_m;
      internal::ScaleMinK4(q, s, &want_sc, &want_m);
      ASSERT_EQ(sc[s], want_sc) << s;
      ASSERT_EQ(m[s], want_m) << s;
    }
  }
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(Fp32ToBf16(1.0f), 0x3F80);
  EXPECT_EQ(Bf16ToFp32(0x3F80), 1.0f);
  // 1 + 2^-8 is halfway between two bf16 values: ties go to the even one (1.0).
  EXPECT_EQ(Fp32ToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);
  EXPECT_EQ(Fp32ToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);
}

using testing::MakeMatrix;
using testing::RandomVector;
using testing::SameBits;
using testing::TestMatrix;

// CPU specifics beyond the op conformance suite (backend_ops_test.cc): the portable kernels
// against the AVX2 ones, thread counts, and the controls showing that fast really is
// batch-variant here.
class MatMulTest : public ::testing::TestWithParam<GgmlType> {};

// The portable kernels (what a CPU without AVX2 runs; the conformance suite covers the AVX2
// ones) against a float64 reference, both schedules, across batch sizes that exercise every
// kernel group and K lengths on and off the 8- and 32-wide steps.
TEST_P(MatMulTest, PortableKernelsMatchFloat64Reference) {
  const GgmlType type = GetParam();
  std::mt19937 rng(11);
  for (int64_t cols : {32, 40, 43, 96, 172, 256, 512}) {
    if (cols % GetGgmlTypeInfo(static_cast<uint32_t>(type))->block_size != 0) continue;
    const int64_t rows = 37;
    TestMatrix w = MakeMatrix(type, rows, cols, rng);
    WeightMatrix wm{type, w.bytes.data(), rows, cols, w.row_bytes};
    for (int64_t m : {1, 3, 5, 33}) {
      const std::vector<float> x = RandomVector(static_cast<size_t>(m * cols), static_cast<uint32_t>(m));
      std::vector<double> ref, mag;
      testing::ReferenceMatMul(x, m, w.values, rows, cols, &ref, &mag);
      // fixed rounds activations to 8 bits against q8_0 and q4_0 weights (int8_dot.h), and so do
      // fast's batches of several rows (cpu_backend.cc: they take fixed's arithmetic).
      const bool quantized = internal::IsInt8Type(type);
      const std::vector<double> q8 = testing::ActivationQ8Bound(x, m, w.values, rows, cols);
      for (Schedule sched : {Schedule::kFast, Schedule::kFixed}) {
        CpuBackend backend(2, /*allow_simd=*/false);
        std::vector<float> y(static_cast<size_t>(m * rows));
        ASSERT_TRUE(backend.MatMul(x.data(), m, wm, y.data(), sched).ok());
        for (size_t i = 0; i < y.size(); ++i) {
          const double extra = quantized && (sched == Schedule::kFixed || m > 1) ? q8[i] : 0.0;
          ASSERT_NEAR(y[i], ref[i], 1e-5 * mag[i] + extra + 1e-6)
              << "fixed " << (sched == Schedule::kFixed) << " m " << m << " k " << cols;
        }
      }
    }
  }
}

// docs/determinism-tests.md item 8 for MatMul: row i of fixed(X[:M]) equals row i of fixed(X) for
// M in {1, 3, 8, 33, 256}, at 1 and 2 threads, K on and off the kernel's steps, and the portable
// kernels give the AVX2 kernels' bits. For q8_0/q4_0 (int8_dot.h, version 3) it fails with the
// AVX-512 or the AVX2 row kernel's eight block totals out of order, with their blocks past the
// last group of eight (k = 352) in the next chain, and with int8_gemm.h's panels in block order
// or its tree's C1 and C2 swapped (tried).
TEST_P(MatMulTest, FixedIsRowInvariantAndSimdIndependent) {
  const GgmlType type = GetParam();
  std::mt19937 rng(21);
  // 352: eight blocks and three more (the int8 kernels' groups of eight and their rest).
  // 768 and 1280: three and five 256-weight blocks.
  for (int64_t cols : {64, 96, 43, 200, 352, 768, 1280}) {
    if (cols % GetGgmlTypeInfo(static_cast<uint32_t>(type))->block_size != 0) continue;
    const int64_t rows = 50, full = 256;
    TestMatrix w = MakeMatrix(type, rows, cols, rng);
    WeightMatrix wm{type, w.bytes.data(), rows, cols, w.row_bytes};
    const std::vector<float> x = RandomVector(static_cast<size_t>(full * cols), 5);
    std::vector<float> reference(static_cast<size_t>(full * rows));
    ASSERT_TRUE(CpuBackend(2, true).MatMul(x.data(), full, wm, reference.data(), Schedule::kFixed).ok());
    for (int threads : {1, 2}) {
      for (bool simd : {true, false}) {
        CpuBackend backend(threads, simd);
        for (int64_t m : {1, 3, 8, 33, 256}) {
          std::vector<float> y(static_cast<size_t>(m * rows));
          ASSERT_TRUE(backend.MatMul(x.data(), m, wm, y.data(), Schedule::kFixed).ok());
          ASSERT_TRUE(SameBits(y.data(), reference.data(), y.size()))
              << "k " << cols << " m " << m << " threads " << threads << " simd " << simd;
        }
        // A row in the middle of a batch, alone.
        std::vector<float> one(static_cast<size_t>(rows));
        ASSERT_TRUE(backend.MatMul(x.data() + 100 * cols, 1, wm, one.data(), Schedule::kFixed).ok());
        ASSERT_TRUE(SameBits(one.data(), reference.data() + 100 * rows, one.size()));
      }
    }
  }
}

// The packed GEMM at a long K (packed_gemm.cc: rows over 4096 values run 2048 at a time, the
// tiles' accumulators kept between chunks, the weight panels packed a group at a time — 64 weight
// rows at these lengths on both kernels, so 130 rows make three groups, the last of two rows —
// and the activation rows in blocks of 48: 100 rows, three blocks, the last short) gives the
// portable kernels' bits for every row: k = 8192 (four chunks) and 4107 (two chunks, a chunk of
// one step, then three elements past the steps). Checked to fail when a later group's panels
// are read from the first group's place, when the later row blocks are skipped, and when a
// chunk starts from zeros instead of its tile's state.
TEST(MatMulFixed, PackedGemmInPanelGroupsAndRowBlocksGivesThePortableBits) {
  SKIP_WITHOUT_AVX2_KERNELS("there is no packed GEMM to compare");
  std::mt19937 rng(61);
  const int64_t rows = 130, m = 100;
  for (int64_t cols : {8192, 4107}) {
    const TestMatrix w = MakeMatrix(GgmlType::kF16, rows, cols, rng);
    const WeightMatrix wm{GgmlType::kF16, w.bytes.data(), rows, cols, w.row_bytes};
    const std::vector<float> x = RandomVector(static_cast<size_t>(m * cols), 62);
    std::vector<float> packed(static_cast<size_t>(m * rows)), portable(packed.size());
    ASSERT_TRUE(CpuBackend(1, true).MatMul(x.data(), m, wm, packed.data(), Schedule::kFixed).ok());
    ASSERT_TRUE(CpuBackend(1, false).MatMul(x.data(), m, wm, portable.data(), Schedule::kFixed).ok());
    for (int64_t i = 0; i < m; ++i) {
      ASSERT_TRUE(SameBits(packed.data() + i * rows, portable.data() + i * rows, static_cast<size_t>(rows)))
          << "k " << cols << " row " << i;
    }
  }
}

// Decode rows (one to three activation rows: the GEMV path) against rows of kStreamPrefetchBytes
// and more, which the AVX2 fixed GEMV takes four at a time: each row's bits are the portable
// kernel's, at one and two threads, f32 and f16. Checked to fail with the four-row kernel's two
// chains per row (the fast family's arithmetic).
TEST(MatMulFixed, DecodeOnLongRowsGivesThePortableBits) {
  SKIP_WITHOUT_AVX2_KERNELS("there is only the portable GEMV");
  std::mt19937 rng(71);
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16}) {
    const int64_t rows = 50, cols = 2048;  // 8 and 4 KiB rows
    const TestMatrix w = MakeMatrix(type, rows, cols, rng);
    const WeightMatrix wm{type, w.bytes.data(), rows, cols, w.row_bytes};
    const std::vector<float> x = RandomVector(static_cast<size_t>(3 * cols), 72);
    for (int64_t m : {1, 3}) {
      std::vector<float> portable(static_cast<size_t>(m * rows));
      ASSERT_TRUE(CpuBackend(1, false).MatMul(x.data(), m, wm, portable.data(), Schedule::kFixed).ok());
      for (int threads : {1, 2}) {
        std::vector<float> y(portable.size());
        ASSERT_TRUE(CpuBackend(threads, true).MatMul(x.data(), m, wm, y.data(), Schedule::kFixed).ok());
        ASSERT_TRUE(SameBits(y.data(), portable.data(), y.size()))
            << GetGgmlTypeInfo(static_cast<uint32_t>(type))->name << " m " << m << " threads " << threads;
      }
    }
  }
}

// The sensitivity control of the test above: the fast schedule really depends on the batch —
// some row of a batch of 5 (a group of four and a leftover row) differs from the same row alone.
// (Which row depends on the kernels: fast q4_0 decode on AVX2 is the fixed GEMV, so there it is
// the leftover row, whose kernel has its own chains.) Against q8_0 and q4_0 weights a decode
// batch takes the fixed arithmetic (FastDecodeRowsGiveTheFixedBits) and a row alone may too, so
// there the batch is a prompt's (fast's own int8 GEMM on AVX-512 VNNI, the float GEMM on AVX2).
// The types whose fast schedule has kernels of its own (quant_formats.h's block types run the
// fixed arithmetic in both: format_gemv.h).
class FastMatMulTest : public ::testing::TestWithParam<GgmlType> {};

TEST_P(FastMatMulTest, FastDependsOnTheBatch) {
  const GgmlType type = GetParam();
  SKIP_WITHOUT_AVX2_KERNELS("the fast family has only its portable kernel here");
  std::mt19937 rng(31);
  const bool quantized = internal::IsInt8Type(type);
  const int64_t rows = 64, cols = 256, m = quantized ? 160 : 5;
  TestMatrix w = MakeMatrix(type, rows, cols, rng);
  WeightMatrix wm{type, w.bytes.data(), rows, cols, w.row_bytes};
  const std::vector<float> x = RandomVector(static_cast<size_t>(m * cols), 7);
  CpuBackend backend(2);
  std::vector<float> alone(static_cast<size_t>(rows)), batched(static_cast<size_t>(m * rows));
  ASSERT_TRUE(backend.MatMul(x.data(), m, wm, batched.data(), Schedule::kFast).ok());
  int differing = 0;
  for (int64_t i = 0; i < m; ++i) {
    ASSERT_TRUE(backend.MatMul(x.data() + i * cols, 1, wm, alone.data(), Schedule::kFast).ok());
    differing += !SameBits(alone.data(), batched.data() + i * rows, alone.size());
  }
  EXPECT_GT(differing, 0);
}

// fast prompt rows against q8_0 and q4_0 weights run the float GEMM on the weights' exact values
// (scale x integer, computed here by the test's own matrix builder) with unquantized activations:
// the same bits as fast rows on an f32 matrix of those values (both BLIS where the build has it,
// both the packed GEMM otherwise). Fails when
// the int8 kernels still take these rows (activations rounded to 8 bits), or with a q4_0 loader
// that drops the -8 offset or takes the high nibbles for the low half (both tried). Where the CPU
// has AVX-512 VNNI, fast prompt rows keep the int8 kernels by design, and the test checks that
// instead (their bits are not the float GEMM's); the ctest entry cpu_kernels_avx2 runs this test
// again capped at AVX2, so a VNNI machine checks both branches.
TEST(MatMulQuantized, FastPromptRowsRunTheFloatGemmOnTheExactWeights) {
  // A CPU without AVX2/FMA/F16C (or LLM42_CPU_SIMD=off, which stands for one) has no packed GEMM:
  // its fast rows run the portable row dot, whose bits are its own.
  SKIP_WITHOUT_AVX2_KERNELS("there is no packed GEMM to take these rows");
  ASSERT_TRUE(internal::PackedGemmAvailable()) << "AVX2 is here but the packed GEMM is off (LLM42_CPU_PACKED=off?)";
  const bool int8_by_design = internal::CpuHasVnni512();
  std::mt19937 rng(41);
  const int64_t rows = 50, cols = 256, m = 512;  // the packed GEMM's rows (BLIS takes larger matrices only)
  const std::vector<float> x = RandomVector(static_cast<size_t>(m * cols), 9);
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0}) {
    TestMatrix w = MakeMatrix(type, rows, cols, rng);
    WeightMatrix wm{type, w.bytes.data(), rows, cols, w.row_bytes};
    WeightMatrix values{GgmlType::kF32, reinterpret_cast<const uint8_t*>(w.values.data()), rows, cols,
                        static_cast<size_t>(cols) * sizeof(float)};
    std::vector<float> fast(static_cast<size_t>(m * rows)), exact(fast.size());
    CpuBackend backend(2);
    ASSERT_TRUE(backend.MatMul(x.data(), m, wm, fast.data(), Schedule::kFast).ok());
    ASSERT_TRUE(backend.MatMul(x.data(), m, values, exact.data(), Schedule::kFast).ok());
    EXPECT_EQ(SameBits(fast.data(), exact.data(), fast.size()), !int8_by_design)
        << GetGgmlTypeInfo(static_cast<uint32_t>(type))->name << (int8_by_design ? " (VNNI: int8 kernels expected)" : "");
  }
}

// Decode batches of two or more rows against q8_0 and q4_0 weights: fast rows get exactly the
// fixed rows' bits, on every CPU (the portable build has no fast int8 kernels at all), mixed
// with fixed rows in one call or not; a lone fast row may take fast's own kernel. Upstream ulps
// otherwise cross an 8-bit rounding boundary now and then and come back as a whole quantization
// step, and deterministic requests' candidates disagree with their replay (cpu_backend.cc).
// Fails when MatMulShared leaves several fast decode rows on fast's own int8 kernels (tried).
TEST(MatMulQuantized, FastDecodeRowsGiveTheFixedBits) {
  std::mt19937 rng(47);
  const int64_t rows = 96, cols = 768;
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0}) {
    TestMatrix w = MakeMatrix(type, rows, cols, rng);
    WeightMatrix wm{type, w.bytes.data(), rows, cols, w.row_bytes};
    CpuBackend backend(2);
    for (int64_t m : {2, 3, 5, 7, 12}) {
      const std::vector<float> x = RandomVector(static_cast<size_t>(m * cols), static_cast<uint32_t>(70 + m));
      std::vector<float> fast(static_cast<size_t>(m * rows)), fixed(fast.size()), mixed(fast.size());
      ASSERT_TRUE(backend.MatMul(x.data(), m, wm, fast.data(), Schedule::kFast).ok());
      ASSERT_TRUE(backend.MatMul(x.data(), m, wm, fixed.data(), Schedule::kFixed).ok());
      std::vector<Schedule> alternate(static_cast<size_t>(m + 1));
      for (int64_t i = 0; i <= m; ++i) alternate[static_cast<size_t>(i)] = i % 3 == 1 ? Schedule::kFixed : Schedule::kFast;
      ASSERT_TRUE(backend.MatMul(x.data(), m, wm, mixed.data(), Schedules(alternate.data())).ok());
      const char* name = GetGgmlTypeInfo(static_cast<uint32_t>(type))->name;
      EXPECT_TRUE(SameBits(fast.data(), fixed.data(), fast.size())) << name << ", " << m << " rows";
      // With a third of the rows fixed, the fast ones are still two or more from m = 3 on.
      if (m >= 3) {
        EXPECT_TRUE(SameBits(mixed.data(), fixed.data(), fast.size())) << name << ", " << m << " mixed rows";
      }
    }
  }
}

// fast prompt rows through BLIS (blas_gemm.h), every float and quantized type: within f32
// rounding of a float64 reference over the weights' exact values, and the same bits as BLIS on an
// f32 matrix of those values (the conversion to f32 is exact), including a matrix longer than a
// conversion slab (512 rows) and a thread's share that starts mid-matrix. Activation rows that
// are not consecutive are declined (the packed GEMM takes them). Fails when a slab is converted
// from the wrong rows or written to the wrong columns (tried: slab offset dropped). It calls
// BlasGemm itself, so neither the CPU nor LLM42_CPU_BLAS matters; it skips only in a build
// without the optional BLIS, which tools/test.sh (the suite's command) never makes: it
// configures with LLM42_WITH_BLIS=ON, and that fails when BLIS is missing.
TEST(BlasGemm, MatchesFloat64ReferenceAndReadsEveryTypeExactly) {
  if (!internal::BlasGemmBuilt()) {
    GTEST_SKIP() << "this build has no BLIS (LLM42_WITH_BLIS=OFF: libblis-serial-dev was not found or was "
                    "turned off), so BlasGemm has nothing to test";
  }
  std::mt19937 rng(43);
  const int64_t cols = 96, m = 128;  // m >= the packed GEMM's threshold
  const std::vector<float> x = RandomVector(static_cast<size_t>(m * cols), 13);
  std::vector<int64_t> all(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) all[static_cast<size_t>(i)] = i;
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0, GgmlType::kQ4_0}) {
    const char* name = GetGgmlTypeInfo(static_cast<uint32_t>(type))->name;
    const int64_t rows = 1100;
    TestMatrix w = MakeMatrix(type, rows, cols, rng);
    std::vector<double> ref, mag;
    testing::ReferenceMatMul(x, m, w.values, rows, cols, &ref, &mag);
    AlignedVector<float> scratch;
    std::vector<float> y(static_cast<size_t>(m * rows), -1.0f), exact(y.size(), -2.0f);
    // Two shares, as two threads would take them: [0, 37) and [37, rows).
    for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, 37}, {37, rows}}) {
      ASSERT_TRUE(internal::BlasGemm(type, w.bytes.data(), w.row_bytes, r0, r1, x.data(), cols, all.data(), m,
                                     y.data(), rows, scratch)) << name;
      ASSERT_TRUE(internal::BlasGemm(GgmlType::kF32, reinterpret_cast<const uint8_t*>(w.values.data()),
                                     static_cast<size_t>(cols) * sizeof(float), r0, r1, x.data(), cols, all.data(), m,
                                     exact.data(), rows, scratch)) << name;
    }
    for (size_t i = 0; i < y.size(); ++i) {
      ASSERT_NEAR(y[i], ref[i], 1e-5 * mag[i] + 1e-6) << name << " output " << i;
    }
    EXPECT_TRUE(SameBits(y.data(), exact.data(), y.size())) << name;
  }
  TestMatrix w = MakeMatrix(GgmlType::kF32, 8, cols, rng);
  std::vector<int64_t> gaps = all;
  gaps.back() += 1;  // not consecutive
  std::vector<float> y(static_cast<size_t>((m + 1) * 8));
  AlignedVector<float> scratch;
  EXPECT_FALSE(internal::BlasGemm(GgmlType::kF32, w.bytes.data(), w.row_bytes, 0, 8, x.data(), cols, gaps.data(), m,
                                  y.data(), 8, scratch));
}

// bf16_gemm.h, the fast schedule's bf16 prompts on AVX-512 BF16: each output within f32
// rounding (two roundings per pair, k / 2 pairs) of a float64 dot product of the weights with the
// activations rounded to bf16 by the scalar rule (Fp32ToBf16, to nearest even), and outside that
// bound of the unrounded activations' product on at least one output (so the rounding is there;
// checked up to k = 200), over odd and
// even K (one and two chunks of K), three panels of which the last is short, a share starting
// mid-panel, activation rows that are not consecutive and a tile of fewer rows, and an output
// stride wider than the matrix. Then the backend's dispatch: fast rows of a bf16 MatMul from 96
// rows give the kernel's bits, fixed rows do not come here (the packed GEMM's bits, which the
// fixed tests above pin). Fails with the transpose's 128-bit lanes swapped, chunks after the first
// started from zero, or the mask of the short panel dropped (each tried).
TEST(Bf16Gemm, RoundsActivationsAndMatchesTheReference) {
  // Only a CPU without AVX-512 BF16 skips (or LLM42_CPU_SIMD=avx2 standing for one: the
  // cpu_kernels_avx2 entry, while the plain entry runs this test on the same machine): the kernel
  // is the test's whole subject and such a CPU has none; its bf16 prompts run the f32 packed GEMM,
  // which FixedIsRowInvariantAndSimdIndependent and the conformance suite cover. Where the CPU has
  // the features, a library that does not detect them fails.
  if (const std::string why = NoBf16Dot512Kernels(); !why.empty()) {
    GTEST_SKIP() << why << ": no Bf16Gemm on this CPU to test (its bf16 prompts take the f32 packed GEMM, "
                           "tested by the other MatMul tests)";
  }
  ASSERT_TRUE(internal::Bf16GemmAvailable()) << "the CPU has AVX-512 BF16 but the library does not detect it";
  std::mt19937 rng(47);
  const int64_t rows = 37, ldy = rows + 3;
  for (int64_t cols : {43, 64, 96, 200, 2089}) {
    TestMatrix w = MakeMatrix(GgmlType::kBF16, rows, cols, rng);
    const int64_t m = 26;
    const std::vector<float> x = RandomVector(static_cast<size_t>(m * cols), static_cast<uint32_t>(cols));
    std::vector<float> rounded(x.size());
    for (size_t i = 0; i < x.size(); ++i) rounded[i] = Bf16ToFp32(Fp32ToBf16(x[i]));
    std::vector<double> ref, mag, unrounded, unused;
    testing::ReferenceMatMul(rounded, m, w.values, rows, cols, &ref, &mag);
    testing::ReferenceMatMul(x, m, w.values, rows, cols, &unrounded, &unused);
    std::vector<int64_t> picked;  // every other activation row: 13, a tile of 12 and one of 1
    for (int64_t i = 0; i < m; i += 2) picked.push_back(i);
    std::vector<uint32_t> xb(static_cast<size_t>(m * internal::Bf16Pairs(cols)));
    internal::RoundActivationsToBf16(x.data(), cols, picked.data(), static_cast<int64_t>(picked.size()), xb.data());
    std::vector<float> y(static_cast<size_t>(m * ldy), -7.0f);
    AlignedVector<uint32_t> panel;
    for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, 21}, {21, rows}}) {
      internal::Bf16Gemm(w.bytes.data(), w.row_bytes, r0, r1, xb.data(), cols, picked.data(),
                         static_cast<int64_t>(picked.size()), y.data(), ldy, panel);
    }
    double farthest = 0;  // from the unrounded activations' product, in units of its bound
    const double bound = static_cast<double>(cols + 2) * std::ldexp(1.0, -23);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t r = 0; r < ldy; ++r) {
        const float got = y[static_cast<size_t>(i * ldy + r)];
        if (i % 2 == 1 || r >= rows) {  // rows not picked and columns past the matrix: untouched
          ASSERT_EQ(got, -7.0f) << "k " << cols << " row " << i << " column " << r;
          continue;
        }
        const size_t o = static_cast<size_t>(i * rows + r);
        ASSERT_NEAR(got, ref[o], bound * mag[o] + 1e-30) << "k " << cols << " row " << i << " column " << r;
        farthest = std::max(farthest, std::fabs(got - unrounded[o]) / (bound * mag[o]));
      }
    }
    // (At k = 2089 the bound, linear in k, outgrows the rounding's effect, which is not.)
    if (cols <= 200) {
      EXPECT_GT(farthest, 1.0) << "k " << cols << ": no output shows the activations' rounding to bf16";
    }
  }
  // The backend: fast rows of a bf16 matrix from the packed GEMM's 96 rows take the kernel.
  const int64_t cols = 200, m = 100;
  TestMatrix w = MakeMatrix(GgmlType::kBF16, rows, cols, rng);
  WeightMatrix wm{GgmlType::kBF16, w.bytes.data(), rows, cols, w.row_bytes};
  const std::vector<float> x = RandomVector(static_cast<size_t>(m * cols), 5);
  std::vector<int64_t> all(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) all[static_cast<size_t>(i)] = i;
  std::vector<uint32_t> xb(static_cast<size_t>(m * internal::Bf16Pairs(cols)));
  internal::RoundActivationsToBf16(x.data(), cols, all.data(), m, xb.data());
  std::vector<float> direct(static_cast<size_t>(m * rows)), fast(direct.size()), fixed(direct.size());
  AlignedVector<uint32_t> panel;
  internal::Bf16Gemm(w.bytes.data(), w.row_bytes, 0, rows, xb.data(), cols, all.data(), m, direct.data(), rows, panel);
  CpuBackend backend(2);
  ASSERT_TRUE(backend.MatMul(x.data(), m, wm, fast.data(), Schedule::kFast).ok());
  ASSERT_TRUE(backend.MatMul(x.data(), m, wm, fixed.data(), Schedule::kFixed).ok());
  EXPECT_TRUE(SameBits(fast.data(), direct.data(), fast.size()));
  EXPECT_FALSE(SameBits(fixed.data(), direct.data(), fixed.size()));
}

std::vector<GgmlType> MatMulTypes() {
  std::vector<GgmlType> types = {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0, GgmlType::kQ4_0};
  types.insert(types.end(), testing::FormatTypes().begin(), testing::FormatTypes().end());
  return types;
}

INSTANTIATE_TEST_SUITE_P(FloatAndInt8Types, FastMatMulTest,
                         ::testing::Values(GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0,
                                           GgmlType::kQ4_0),
                         [](const ::testing::TestParamInfo<GgmlType>& info) {
                           return std::string(GetGgmlTypeInfo(static_cast<uint32_t>(info.param))->name);
                         });

INSTANTIATE_TEST_SUITE_P(AllTypes, MatMulTest, ::testing::ValuesIn(MatMulTypes()),
                         [](const ::testing::TestParamInfo<GgmlType>& info) {
                           return std::string(GetGgmlTypeInfo(static_cast<uint32_t>(info.param))->name);
                         });

// Item 8 for attention across thread counts: KV lengths straddling the fixed chunk (256) and
// block (16) boundaries; each row alone and in the batch, at 1, 2 and 4 threads: the same bits.
TEST(Attention, FixedIsThreadInvariant) {
  const std::vector<int64_t> lens = {1, 15, 16, 17, 255, 256, 257, 600};
  const std::vector<float> q = RandomVector(lens.size() * 4 * 64, 4);
  std::vector<std::pair<int, int32_t>> all;
  for (size_t i = 0; i < lens.size(); ++i) all.push_back({static_cast<int>(i), static_cast<int32_t>(lens[i] - 1)});
  CpuBackend two(2);
  const std::vector<float> batch = testing::AttentionFixture(two, lens).Run(all, q, Schedule::kFixed);
  const size_t row = 4 * 64;
  for (int threads : {1, 4}) {
    CpuBackend be(threads);
    testing::AttentionFixture f(be, lens);
    EXPECT_TRUE(SameBits(f.Run(all, q, Schedule::kFixed).data(), batch.data(), batch.size()));
    for (size_t i = 0; i < all.size(); ++i) {
      const std::vector<float> alone = f.Run({all[i]}, q, Schedule::kFixed);
      EXPECT_TRUE(SameBits(alone.data(), batch.data() + i * row, row)) << "length " << lens[i];
    }
  }
}

// Random keys and values stored in `dtype` as the CPU backend lays out one layer: kBlocks blocks
// of 16 positions, each [keys | values] of kv_heads heads of hd elements; positions follow kTable
// (shuffled blocks).
struct StoredKv {
  static constexpr int64_t kBlocks = 8, kBlockSize = 16;
  static constexpr int32_t kTable[kBlocks] = {5, 2, 7, 0, 3, 6, 1, 4};
  std::vector<uint8_t> storage;
  internal::KvLayerView kv;

  StoredKv(KvDtype dtype, int64_t hd, int64_t kv_heads, uint32_t seed) {
    const int64_t elem = dtype == KvDtype::kF32 ? 4 : 2, kv_dim = kv_heads * hd;
    storage.resize(static_cast<size_t>(kBlocks * 2 * kBlockSize * kv_dim * elem));
    const std::vector<float> raw = RandomVector(storage.size() / static_cast<size_t>(elem), seed);
    for (size_t i = 0; i < raw.size(); ++i) {
      if (dtype == KvDtype::kF32) {
        std::memcpy(storage.data() + 4 * i, &raw[i], 4);
      } else {
        const uint16_t h = dtype == KvDtype::kF16 ? Fp32ToFp16(raw[i]) : Fp32ToBf16(raw[i]);
        std::memcpy(storage.data() + 2 * i, &h, 2);
      }
    }
    kv.base = storage.data();
    kv.block_stride = 2 * kBlockSize * kv_dim;
    kv.v_offset = kBlockSize * kv_dim;
    kv.block_size = static_cast<int32_t>(kBlockSize);
    kv.kv_dim = kv_dim;
    kv.elem = elem;
  }
};

// The blocked attention kernel (attention.h) gives every query the one-query kernel's bits and
// the portable code's: 1 to kMaxBlockQueries queries (every count to 10, then across the AVX-512
// kernel's sub-blocks of eight and the AVX2 kernel's groups of four) with different ends (shared
// prefixes of 0 to 40 keys and remainders of 0 to 7), head sizes 16 to 128, every KV type, keys
// spread over shuffled blocks. Checked to fail when the reduction's second step pairs lanes
// differently ((l0+l4)+(l1+l5) in Scores4), when a value sum starts from zero for the remainder,
// and when the AVX2 kernel skips the 16-column value pass after its 24-column ones (hd 64).
TEST(Attention, BlockedQueriesGiveTheOneQueryBits) {
  for (KvDtype dtype : {KvDtype::kF32, KvDtype::kF16, KvDtype::kBf16}) {
    // The one-query kernels are compared with the portable code by the other attention tests on
    // every machine. Where AVX2 is there, a missing blocked kernel fails below.
    SKIP_WITHOUT_AVX2_KERNELS("the blocked attention kernel does not exist to compare");
    for (int64_t hd : {16, 48, 64, 128}) {
      const internal::AttendRangeFn one = internal::SelectAttendRange(dtype, true, hd);
      const internal::AttendRangeFn portable = internal::SelectAttendRange(dtype, false, hd);
      const internal::AttendBlockFn block = internal::SelectAttendBlock(dtype, true, hd);
      ASSERT_NE(block, nullptr);
      const StoredKv stored(dtype, hd, 2, 21);
      const internal::KvLayerView& kv = stored.kv;
      const int64_t elem = kv.elem;
      const int32_t* table = StoredKv::kTable;
      const int64_t off = hd * elem;  // the second KV head
      const float scale = 0.125f;
      constexpr int kMax = internal::kMaxBlockQueries;
      const std::vector<float> q = RandomVector(static_cast<size_t>(kMax * hd), 22);
      for (int n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 15, 16, 17, 23, kMax}) {
        for (int64_t begin : {int64_t{0}, int64_t{13}}) {
          for (int64_t shared : {1, 3, 4, 17, 40}) {
            const float* qs[kMax];
            int64_t end[kMax];
            std::vector<float> scores(static_cast<size_t>(kMax * 64)), outs(static_cast<size_t>(kMax * hd));
            float* sc[kMax];
            float* os[kMax];
            for (int j = 0; j < n; ++j) {
              qs[j] = q.data() + j * hd;
              end[j] = begin + shared + (j * 5) % 8;  // queries' own remainders: 0..7 keys
              sc[j] = scores.data() + j * 64;
              os[j] = outs.data() + j * hd;
            }
            internal::Partial parts[kMax];
            block(qs, n, kv, table, off, hd, scale, begin, end, sc, os, parts);
            for (int j = 0; j < n; ++j) {
              std::vector<float> s1(64), o1(static_cast<size_t>(hd)), sp(64), op(static_cast<size_t>(hd));
              const internal::Partial p1 = one(qs[j], kv, table, off, hd, scale, begin, end[j], s1.data(), o1.data());
              const internal::Partial pp = portable(qs[j], kv, table, off, hd, scale, begin, end[j], sp.data(), op.data());
              const std::string where = absl::StrCat("kv type ", static_cast<int>(dtype), " hd ", hd, " n ", n,
                                                     " begin ", begin, " shared ", shared, " query ", j);
              ASSERT_TRUE(SameBits(os[j], o1.data(), o1.size())) << where;
              ASSERT_TRUE(SameBits(os[j], op.data(), op.size())) << where;
              ASSERT_TRUE(SameBits(&parts[j].max, &p1.max, 1) && SameBits(&parts[j].sum, &p1.sum, 1)) << where;
              ASSERT_TRUE(SameBits(&parts[j].sum, &pp.sum, 1)) << where;
            }
          }
        }
      }
    }
  }
}

// The portable one-query kernel computes attention.h's definition, written out again here from
// the header's words (f32 keys and values): scores by eight lanes and the fixed tree, then the
// tail; the running maximum one score at a time; PortableExpf(score - max) summed in position
// order; each output element's products summed in position order. Every SIMD kernel is compared
// with the portable one by the tests around this one, so this pins them all to the definition.
// Lengths within a block and across shuffled blocks, head sizes with and without a tail, eight
// random queries and one of zeros (every score +0). Checked to fail when the portable kernel's
// maximum skips the last position.
TEST(Attention, PortableKernelComputesTheDefinition) {
  for (int64_t hd : {20, 64}) {
    const StoredKv stored(KvDtype::kF32, hd, 2, 31);
    const internal::KvLayerView& kv = stored.kv;
    const int32_t* table = StoredKv::kTable;
    const int64_t off = hd * 4;  // the second KV head
    const internal::AttendRangeFn portable = internal::SelectAttendRange(KvDtype::kF32, false, hd);
    auto at = [&](int64_t t, int64_t d, bool value) {
      float f;
      std::memcpy(&f, (value ? kv.value(table, t) : kv.key(table, t)) + off + 4 * d, 4);
      return f;
    };
    for (uint32_t seed = 0; seed <= 8; ++seed) {  // eight random queries, then one of zeros
      const bool zeros = seed == 8;
      std::vector<float> q = RandomVector(static_cast<size_t>(hd), 32 + seed);
      if (zeros) std::fill(q.begin(), q.end(), 0.0f);
      for (int64_t begin : {int64_t{0}, int64_t{5}}) {
        for (int64_t end : {begin + 1, begin + 9, begin + 16, begin + 37, int64_t{128}}) {
          const int64_t n = end - begin;
          std::vector<float> s(static_cast<size_t>(n));
          float max = -INFINITY;
          for (int64_t t = 0; t < n; ++t) {
            float lane[8] = {};
            int64_t i = 0;
            for (; i + 8 <= hd; i += 8) {
              for (int l = 0; l < 8; ++l) lane[l] += q[i + l] * at(begin + t, i + l, false);
            }
            float dot = ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
            for (; i < hd; ++i) dot += q[i] * at(begin + t, i, false);
            s[t] = dot * 0.125f;
            max = std::max(max, s[t]);
          }
          float sum = 0;
          std::vector<float> want(static_cast<size_t>(hd), 0.0f);
          for (int64_t t = 0; t < n; ++t) {
            const float e = PortableExpf(s[t] - max);
            sum += e;
            for (int64_t d = 0; d < hd; ++d) want[d] += e * at(begin + t, d, true);
          }
          std::vector<float> scores(static_cast<size_t>(n)), o(static_cast<size_t>(hd));
          const internal::Partial p = portable(q.data(), kv, table, off, hd, 0.125f, begin, end, scores.data(), o.data());
          const std::string where = absl::StrCat("hd ", hd, " zeros ", zeros, " begin ", begin, " end ", end);
          EXPECT_TRUE(SameBits(o.data(), want.data(), want.size())) << where;
          EXPECT_TRUE(SameBits(&p.sum, &sum, 1)) << where;
          EXPECT_EQ(p.max, max) << where;  // the same value (a zero's sign is not part of it)
        }
      }
    }
  }
}

// The heads kernel (attention.h: a decode row's query heads over each position's whole KV row)
// gives each head the one-query kernel's bits and the portable code's, writes only heads
// [h0, h1): head sizes 16 to 128, every KV type, 1 and 3 query heads per KV head, ranges within
// one block and across shuffled blocks, all heads and slices of them (an odd number too).
// Checked to fail when a query head reads KV head h % 4 instead of h / group, when the four-head
// score loop sums its lanes in order instead of the fixed tree, and when the second position's
// value sum is off by an ulp (all three tried).
TEST(Attention, HeadsKernelGivesTheOneQueryBits) {
  SKIP_WITHOUT_AVX2_KERNELS("the heads kernel does not exist to compare");
  for (KvDtype dtype : {KvDtype::kF32, KvDtype::kF16, KvDtype::kBf16}) {
    for (int64_t hd : {16, 48, 64, 128}) {
      const internal::AttendHeadsFn heads = internal::SelectAttendHeads(dtype, true, hd);
      const internal::AttendRangeFn one = internal::SelectAttendRange(dtype, true, hd);
      const internal::AttendRangeFn portable = internal::SelectAttendRange(dtype, false, hd);
      ASSERT_NE(heads, nullptr);
      for (int64_t group : {1, 3}) {
        const int64_t kv_heads = 4, n_head = kv_heads * group;
        const StoredKv stored(dtype, hd, kv_heads, 31);
        const internal::KvLayerView& kv = stored.kv;
        const std::vector<float> q = RandomVector(static_cast<size_t>(n_head * hd), 32);
        const std::pair<int64_t, int64_t> ranges[] = {{0, 1}, {0, 17}, {13, 100}, {5, 128}};
        const std::pair<int64_t, int64_t> slices[] = {{0, n_head}, {group, 3 * group}, {1, n_head}};
        for (const auto& [begin, end] : ranges) {
          for (const auto& [h0, h1] : slices) {
            std::vector<float> scores(static_cast<size_t>((h1 - h0) * (end - begin)));
            std::vector<float> o(static_cast<size_t>(n_head * hd), 12345.0f);
            std::vector<internal::Partial> parts(static_cast<size_t>(n_head));
            heads(q.data(), h0, h1, group, kv, StoredKv::kTable, hd, 0.125f, begin, end, scores.data(), o.data(),
                  parts.data());
            for (int64_t h = 0; h < n_head; ++h) {
              const std::string where = absl::StrCat("kv type ", static_cast<int>(dtype), " hd ", hd, " group ",
                                                     group, " range ", begin, "..", end, " heads ", h0, "..", h1,
                                                     " head ", h);
              const float* oh = o.data() + h * hd;
              if (h < h0 || h >= h1) {
                for (int64_t d = 0; d < hd; ++d) ASSERT_EQ(oh[d], 12345.0f) << where;
                continue;
              }
              std::vector<float> s1(static_cast<size_t>(end - begin)), o1(static_cast<size_t>(hd)), op(o1.size());
              const int64_t off = (h / group) * hd * kv.elem;
              const internal::Partial p1 =
                  one(q.data() + h * hd, kv, StoredKv::kTable, off, hd, 0.125f, begin, end, s1.data(), o1.data());
              const internal::Partial pp =
                  portable(q.data() + h * hd, kv, StoredKv::kTable, off, hd, 0.125f, begin, end, s1.data(), op.data());
              ASSERT_TRUE(SameBits(oh, o1.data(), o1.size())) << where;
              ASSERT_TRUE(SameBits(oh, op.data(), op.size())) << where;
              const internal::Partial& ph = parts[static_cast<size_t>(h)];
              ASSERT_TRUE(SameBits(&ph.max, &p1.max, 1) && SameBits(&ph.sum, &p1.sum, 1)) << where;
              ASSERT_TRUE(SameBits(&ph.max, &pp.max, 1) && SameBits(&ph.sum, &pp.sum, 1)) << where;
            }
          }
        }
      }
    }
  }
}

// At the backend: a prompt's rows (runs of consecutive positions of one sequence, which run as
// blocks, across the fixed chunk at 256 and into a sequence's first keys) give, under both
// schedules, the bits of each row alone (one query per block) and of the portable kernels.
TEST(Attention, PromptRowsGiveTheirAloneBits) {
  const std::vector<int64_t> lens = {600, 40};
  const std::vector<float> q = RandomVector(lens.size() * 4 * 64, 23);
  std::vector<std::pair<int, int32_t>> rows;
  for (int32_t p = 240; p < 275; ++p) rows.push_back({0, p});
  for (int32_t p = 0; p < 13; ++p) rows.push_back({1, p});
  CpuBackend be(2), portable(1, false);
  testing::AttentionFixture f(be, lens), fp(portable, lens);
  const size_t row = 4 * 64;
  for (Schedule s : {Schedule::kFast, Schedule::kFixed}) {
    const std::vector<float> batch = f.Run(rows, q, s);
    EXPECT_TRUE(SameBits(batch.data(), fp.Run(rows, q, s).data(), batch.size())) << "fixed " << (s == Schedule::kFixed);
    for (size_t i = 0; i < rows.size(); ++i) {
      const std::vector<float> alone = f.Run({rows[i]}, q, s);
      ASSERT_TRUE(SameBits(alone.data(), batch.data() + i * row, row))
          << "position " << rows[i].second << " fixed " << (s == Schedule::kFixed);
    }
  }
}

// The KV cache's rounding to f16 and bf16 (round_row.h) on AVX2 gives the scalar conversions'
// bits: a million random bit patterns (every exponent, NaNs with payloads of both signs), then
// the edges — zeros, infinities, the largest finite f16 and the first value that overflows it,
// ties to even around f16's and bf16's last bits, f16 subnormals and the smallest value that does
// not flush — at row lengths on and off the 8-lane steps. Fails with F16C's NaNs kept as they are
// (payload bits survive), with the bf16 rounding's tie-to-even term dropped, and with
// round-toward-zero for f16 (tried).
// RMSNorm's sums of squares: the AVX2 kernel (eight rows at once, a row per f64 lane) gives the
// scalar loop's bits for every row, over row counts on and off the groups of eight and lengths on
// and off the four-column steps, with values spread over many magnitudes (so that the order of
// the f64 additions shows). Fails with a group's columns added out of order, or the columns past
// the last four left out (both tried).
TEST(SumSquares, SimdGivesTheScalarBits) {
  SKIP_WITHOUT_AVX2_KERNELS("there is no SIMD kernel to compare");
  std::mt19937 rng(53);
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  for (int64_t n : {1, 3, 4, 7, 64, 768, 771}) {
    for (int64_t rows : {1, 7, 8, 9, 16, 21}) {
      std::vector<float> x(static_cast<size_t>(rows * n));
      for (float& v : x) v = std::ldexp(mantissa(rng), exponent(rng));
      std::vector<double> simd(static_cast<size_t>(rows)), scalar(simd.size());
      internal::SumSquares(x.data(), n, rows, simd.data(), true);
      internal::SumSquares(x.data(), n, rows, scalar.data(), false);
      for (int64_t i = 0; i < rows; ++i) {
        double expected = 0;  // the definition, written out
        for (int64_t j = 0; j < n; ++j) {
          const float v = x[static_cast<size_t>(i * n + j)];
          expected += static_cast<double>(v * v);
        }
        const auto at = static_cast<size_t>(i);
        ASSERT_EQ(std::memcmp(&simd[at], &expected, sizeof(double)), 0) << "n " << n << " row " << i;
        ASSERT_EQ(std::memcmp(&scalar[at], &expected, sizeof(double)), 0) << "n " << n << " row " << i;
      }
    }
  }
}

// row_ops.h's element-wise steps: the AVX-512 loops give the scalar loops' bits, every length
// from 0 to 40 (masked last steps) and a long one, on values of many magnitudes with zeros of
// both signs, infinities, NaNs and subnormals among them. Fails with SwiGLU's quotient taken as
// a product by the reciprocal, or the norm's product in the other order (both tried). A CPU
// without AVX-512 (or LLM42_CPU_SIMD=avx2 standing for one) runs the scalar loops both times.
TEST(RowOps, SimdGivesTheScalarBits) {
  std::mt19937 rng(59);
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-140, 60);
  const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-42f, -3e-39f};
  auto values = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& f : v) f = rng() % 16 == 0 ? specials[rng() % 7] : std::ldexp(mantissa(rng), exponent(rng));
    return v;
  };
  auto same = [](const std::vector<float>& a, const std::vector<float>& b) {  // (memcmp may not take n = 0's nulls)
    return a.empty() || SameBits(a.data(), b.data(), a.size());
  };
  std::vector<int64_t> lengths;
  for (int64_t n = 0; n <= 40; ++n) lengths.push_back(n);
  lengths.push_back(1000);
  for (int64_t n : lengths) {
    const std::vector<float> x = values(n), w = values(n), up = values(n), e = values(n);
    const float scale = std::ldexp(mantissa(rng), exponent(rng) / 4);
    std::vector<float> a(x.size()), b(x.size());
    internal::ScaleByWeights(x.data(), scale, w.data(), n, a.data(), true);
    internal::ScaleByWeights(x.data(), scale, w.data(), n, b.data(), false);
    ASSERT_TRUE(same(a, b)) << "ScaleByWeights n " << n;
    a = w;
    b = w;
    internal::AddInPlace(a.data(), x.data(), n, true);
    internal::AddInPlace(b.data(), x.data(), n, false);
    ASSERT_TRUE(same(a, b)) << "AddInPlace n " << n;
    internal::SwiGluFinish(x.data(), up.data(), e.data(), n, a.data(), true);
    internal::SwiGluFinish(x.data(), up.data(), e.data(), n, b.data(), false);
    ASSERT_TRUE(same(a, b)) << "SwiGluFinish n " << n;
    internal::Negate(x.data(), n, a.data(), true);
    internal::Negate(x.data(), n, b.data(), false);
    ASSERT_TRUE(same(a, b)) << "Negate n " << n;
  }
}

TEST(RoundRow, SimdGivesTheScalarBits) {
  SKIP_WITHOUT_AVX2_KERNELS("rows are rounded by the scalar code only");
  std::vector<uint32_t> bits;
  std::mt19937 rng(83);
  for (int i = 0; i < (1 << 20); ++i) bits.push_back(static_cast<uint32_t>(rng()));
  for (uint32_t b : {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00001u, 0x7F800001u,
                     0x477FE000u, 0x477FEFFFu, 0x477FF000u, 0x477FF001u, 0x3F801000u, 0x3F803000u, 0x3F808000u,
                     0x3F818000u, 0x33000000u, 0x33000001u, 0x387FC000u, 0x38800000u, 0x00000001u, 0x7F7FFFFFu}) {
    bits.push_back(b);
  }
  for (int64_t n : {static_cast<int64_t>(bits.size()), int64_t{13}, int64_t{7}}) {
    std::vector<float> x(static_cast<size_t>(n));
    std::memcpy(x.data(), bits.data() + bits.size() - static_cast<size_t>(n), x.size() * sizeof(float));
    std::vector<uint8_t> simd(2 * x.size()), scalar(simd.size());
    internal::RoundRowToF16(x.data(), n, simd.data(), true);
    internal::RoundRowToF16(x.data(), n, scalar.data(), false);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(std::memcmp(&simd[2 * i], &scalar[2 * i], 2), 0) << "f16 of 0x" << std::hex << bits[bits.size() - n + i];
    }
    internal::RoundRowToBf16(x.data(), n, simd.data(), true);
    internal::RoundRowToBf16(x.data(), n, scalar.data(), false);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(std::memcmp(&simd[2 * i], &scalar[2 * i], 2), 0) << "bf16 of 0x" << std::hex << bits[bits.size() - n + i];
    }
  }
  // The scalar conversions themselves at two edges, against their definitions: 65520 (halfway
  // between f16's largest finite value 65504 and 2^16) rounds to infinity, 1 + 2^-8 (a bf16 tie)
  // to even (1.0).
  uint8_t h[2];
  const float edge[2] = {65520.0f, 1.0f + 0x1p-8f};
  internal::RoundRowToF16(edge, 1, h, false);
  EXPECT_EQ(h[0] | h[1] << 8, 0x7C00);
  internal::RoundRowToBf16(edge + 1, 1, h, false);
  EXPECT_EQ(h[0] | h[1] << 8, 0x3F80);
}

// Activation quantization (int8_dot.h) on AVX-512 (or AVX2, where the CPU lacks AVX-512 VNNI or
// LLM42_CPU_SIMD=avx2) gives the scalar definition's bytes, scales and biases: random rows over
// scales from 1e-30 to 1e30, exact ties (a block whose max is 127 holds k + 0.5 and -(k + 0.5)),
// zeros, signed zeros, denormals, NaN and infinities. Checked to fail with ties rounded to even
// (_mm512_cvtps_epi32 instead of RoundHalfAway; _mm256_cvtps_epi32 in the AVX2 form) and, for
// AVX2, with saturating packs of the rounded values instead of their low bytes (the NaN row).
TEST(QuantizeActivations, SimdGivesTheScalarBits) {
  SKIP_WITHOUT_AVX2_KERNELS("activations are quantized by the scalar code only");
  std::vector<float> x;
  std::mt19937 rng(41);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float scale : {1e-30f, 1e-3f, 1.0f, 7.5f, 1e30f}) {
    for (int i = 0; i < 32 * 8; ++i) x.push_back(u(rng) * scale);
  }
  for (int i = 0; i < 32; ++i) x.push_back(i == 0 ? 127.0f : (i % 2 ? 1 : -1) * (static_cast<float>(i) + 0.5f));
  for (int i = 0; i < 32; ++i) x.push_back(i % 2 ? 0.0f : -0.0f);
  for (int i = 0; i < 32; ++i) x.push_back(static_cast<float>(i) * 1e-45f);  // denormals
  for (float special : {NAN, INFINITY, -INFINITY}) {
    for (int i = 0; i < 32; ++i) x.push_back(i == 5 ? special : u(rng));
  }
  const int64_t k = static_cast<int64_t>(x.size());
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0}) {
    std::vector<internal::ActivationPairQ8> simd(static_cast<size_t>(internal::ActivationPairs(k))), scalar(simd.size());
    internal::QuantizeActivations(x.data(), k, type, simd.data(), true);
    internal::QuantizeActivations(x.data(), k, type, scalar.data(), false);
    for (size_t p = 0; p < simd.size(); ++p) {
      ASSERT_EQ(std::memcmp(&simd[p], &scalar[p], sizeof(simd[p])), 0) << "blocks " << 2 * p << " and " << 2 * p + 1;
    }
    // The ties block: 127 / 127 = 1, so value k + 0.5 rounds to k + 1, -(k + 0.5) to -(k + 1).
    const internal::ActivationBlockQ8 ties = internal::ActivationBlock(scalar.data(), 5 * 8);
    EXPECT_EQ(ties.q[1], 2);
    EXPECT_EQ(ties.q[2], -3);
  }
}

// The prompt GEMMs for q8_0/q4_0 on AVX-512 VNNI (int8_gemm.h: weight panels, and activation
// panels for fewer rows) against both families' definitions written out in scalar code
// (WholeBlockDot), bit for bit: weight rows a share starting mid-matrix and ending in a part-filled panel, in one packed group or three, activation rows not
// consecutive in every tile width (1 to 6), in one row block or two, odd and even block counts,
// fewer blocks than chains and more; nothing written outside the share's columns. Then through
// the backend: a prompt's fast and fixed rows give those bits (the backend takes this kernel for
// them). Fails with a panel's scales packed from the neighbouring row, with full-width stores at a
// panel's end, with a group's panels looked up from the share's start, or with the backend sending
// the rows to int8_dot.h's tiles (tried with version 2), with fixed's panels packed in block
// order rather than chain by chain, with the tree's C2 and C1 swapped, and with activation panels
// taking every lane's bias from the first row or a tree of (C0+C2)+(C4+C6) (tried).
// The int8 definitions written out here from GGUF's block layouts: the blocks' exact integer
// products in order, each converted and fused-multiply-added with f32(weight scale) x d (rounded
// to f32) into chain b mod `chains` of f32 chains from +0; fixed's (int8_dot.h, version 3) has
// eight and the tree ((C0+C4)+(C2+C6)) + ((C1+C5)+(C3+C7)), fast's one.
float WholeBlockDot(GgmlType type, const uint8_t* row, const internal::ActivationPairQ8* x, int64_t k,
                    int chains) {
  float c[8] = {};
  for (int64_t b = 0; b < k / 32; ++b) {
    const internal::ActivationBlockQ8 xb = internal::ActivationBlock(x, b);
    int32_t p = 0;
    uint16_t scale;
    if (type == GgmlType::kQ8_0) {
      const auto& blk = reinterpret_cast<const BlockQ8_0*>(row)[b];
      for (int e = 0; e < 32; ++e) p += blk.q[e] * xb.q[e];
      scale = blk.scale;
    } else {  // q4_0: element e < 16 the low nibble of byte e, else the high nibble of byte e - 16; minus 8
      const auto& blk = reinterpret_cast<const BlockQ4_0*>(row)[b];
      for (int e = 0; e < 32; ++e) p += ((e < 16 ? blk.q[e] & 0x0F : blk.q[e - 16] >> 4) - 8) * xb.q[e];
      scale = blk.scale;
    }
    c[b % chains] = PortableFmaf(static_cast<float>(p), Fp16ToFp32(scale) * xb.d, c[b % chains]);
  }
  if (chains == 1) return c[0];
  return ((c[0] + c[4]) + (c[2] + c[6])) + ((c[1] + c[5]) + (c[3] + c[7]));
}

void CheckInt8Gemm(GgmlType type, std::mt19937& rng) {
  const std::string what = GetGgmlTypeInfo(static_cast<uint32_t>(type))->name;
  // k = 4096: one panel pair per packed group, so the share's 66 rows are three groups.
  for (int64_t k : {32, 96, 352, 768, 4096}) {
    const int64_t n = 71, r0 = 5, r1 = 71, m = 121;
    TestMatrix w = MakeMatrix(type, n, k, rng);
    const std::vector<float> x = RandomVector(static_cast<size_t>(m * k), static_cast<uint32_t>(k));
    const int64_t pairs = internal::ActivationPairs(k);
    std::vector<internal::ActivationPairQ8> act(static_cast<size_t>(m * pairs));
    std::vector<int32_t> biases(static_cast<size_t>(m * (k / 32)));
    for (int64_t i = 0; i < m; ++i) {
      internal::QuantizeActivations(x.data() + i * k, k, type, act.data() + i * pairs);
      internal::Int8GemmBiases(act.data() + i * pairs, k, biases.data() + i * (k / 32));
    }
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < m; i += 2) rows.push_back(i);  // 61 rows: blocks of 48 and 13, tiles of 6 and a tail
    // y against the definition with `chains` chains for activation rows rows[0..take) and the
    // share's columns, untouched (NaN) elsewhere.
    auto matches = [&](const std::vector<float>& y, size_t take, int chains) -> ::testing::AssertionResult {
      for (int64_t i = 0; i < m; ++i) {
        const bool taken = i % 2 == 0 && static_cast<size_t>(i / 2) < take;
        for (int64_t r = 0; r < n; ++r) {
          const float got = y[static_cast<size_t>(i * n + r)];
          if (!taken || r < r0 || r >= r1) {
            if (!std::isnan(got)) return ::testing::AssertionFailure() << "wrote row " << i << " column " << r;
            continue;
          }
          const float want =
              WholeBlockDot(type, w.bytes.data() + r * w.row_bytes, act.data() + i * pairs, k, chains);
          if (!SameBits(&got, &want, 1)) {
            return ::testing::AssertionFailure()
                   << "k " << k << " row " << i << " column " << r << ": " << got << " vs " << want;
          }
        }
      }
      return ::testing::AssertionSuccess();
    };
    // Int8GemmFewRows (fixed's definition) from activation panels: one panel, a full one and one
    // more row, three with the last part-filled; the share's 66 weight rows end in two of a
    // group of four.
    for (size_t take : {size_t{1}, size_t{16}, size_t{17}, size_t{40}}) {
      std::vector<float> y(static_cast<size_t>(m * n), NAN);
      AlignedVector<uint8_t> panels(static_cast<size_t>(internal::ActivationPanelBytes(static_cast<int64_t>(take), k)));
      internal::PackActivationPanels(act.data(), biases.data(), k, rows.data(), static_cast<int64_t>(take),
                                     panels.data());
      internal::Int8GemmFewRows(type, w.bytes.data(), w.row_bytes, r0, r1, panels.data(), k, rows.data(),
                                static_cast<int64_t>(take), y.data(), n);
      ASSERT_TRUE(matches(y, take, 8)) << what << " few rows, " << take << " rows";
    }
    for (auto [family, chains] :
         {std::pair{internal::DotFamily::kFast, 1}, std::pair{internal::DotFamily::kFixed, 8}}) {
      for (size_t take : {rows.size(), size_t{1}, size_t{2}, size_t{4}, size_t{5}}) {
        std::vector<float> y(static_cast<size_t>(m * n), NAN);
        AlignedVector<uint8_t> panel;
        internal::Int8Gemm(family, type, w.bytes.data(), w.row_bytes, r0, r1, act.data(), biases.data(), k,
                           rows.data(), static_cast<int64_t>(take), y.data(), n, panel);
        ASSERT_TRUE(matches(y, take, chains)) << what << " weight panels, chains " << chains << ", " << take << " rows";
      }
    }
  }
  // The backend's rows of either schedule: from kFewRowsMin through activation panels, from
  // kInt8GemmMinRows through weight panels (fast's in its own arithmetic).
  const int64_t n = 40, k = 352;
  TestMatrix w = MakeMatrix(type, n, k, rng);
  WeightMatrix wm{type, w.bytes.data(), n, k, w.row_bytes};
  for (int64_t m : {internal::kFewRowsMin, int64_t{40}, internal::kInt8GemmMinRows}) {
    const std::vector<float> x = RandomVector(static_cast<size_t>(m * k), static_cast<uint32_t>(m));
    for (Schedule sched : {Schedule::kFast, Schedule::kFixed}) {
      const int chains = sched == Schedule::kFast && m >= internal::kInt8GemmMinRows ? 1 : 8;
      std::vector<float> y(static_cast<size_t>(m * n));
      CpuBackend backend(2);
      ASSERT_TRUE(backend.MatMul(x.data(), m, wm, y.data(), sched).ok());
      std::vector<internal::ActivationPairQ8> act(static_cast<size_t>(internal::ActivationPairs(k)));
      for (int64_t i = 0; i < m; ++i) {
        internal::QuantizeActivations(x.data() + i * k, k, type, act.data());
        for (int64_t r = 0; r < n; ++r) {
          const float want = WholeBlockDot(type, w.bytes.data() + r * w.row_bytes, act.data(), k, chains);
          ASSERT_TRUE(SameBits(&y[static_cast<size_t>(i * n + r)], &want, 1))
              << what << " chains " << chains << " backend, " << m << " rows: row " << i << " column " << r;
        }
      }
    }
  }
}

TEST(Int8Gemm, ComputesBothDefinitionsAndTakesPromptRows) {
  // Only a CPU without AVX-512 VNNI skips (or LLM42_CPU_SIMD=avx2 standing for one: the
  // cpu_kernels_avx2 entry, while the plain entry runs this test on the same machine): the panel
  // kernels are the test's whole subject and such a CPU has none; its quantized rows run
  // int8_dot.h's row kernels or the float GEMM, which FixedIsRowInvariantAndSimdIndependent and the
  // tests above cover. Where the CPU has the features, a library that does not detect them fails.
  if (const std::string why = NoVnni512Kernels(); !why.empty()) {
    GTEST_SKIP() << why << ": no Int8Gemm or Int8GemmFewRows to test";
  }
  ASSERT_TRUE(internal::Int8GemmAvailable()) << "the CPU has AVX-512 VNNI but the library does not detect it";
  std::mt19937 rng(43);
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0}) {
    CheckInt8Gemm(type, rng);
    if (HasFatalFailure()) return;
  }
}

// Fast attention takes fixed's chunks as well (its kernels give every CPU's bits and read the
// same bytes either way, so another order would buy nothing): a long prefix alone (a decode
// row, its chunks spread over the threads) gives the bits it has in a batch. Fails when
// AttendDecodeRows splits each prefix into as many parts as there are threads per token (what
// fast did before), as do the fixed tests above (tried).
TEST(Attention, FastIsBatchInvariantToo) {
  CpuBackend be(4);
  testing::AttentionFixture f(be, {600, 600, 600, 600});
  const std::vector<float> q = RandomVector(4 * 4 * 64, 6);
  const std::vector<float> alone = f.Run({{0, 599}}, q, Schedule::kFast);
  const std::vector<float> batch = f.Run({{0, 599}, {1, 599}, {2, 599}, {3, 599}}, q, Schedule::kFast);
  EXPECT_TRUE(SameBits(alone.data(), batch.data(), alone.size()));
}

// A KV cache of f16 or bf16: keys and values are rounded to the type when stored (nearest, ties
// to even), and attention on them matches the float64 reference on the rounded values as closely
// as on f32 ones; fixed stays row-invariant and gives the portable kernels' bits. The control:
// the output differs from the f32 cache's (the rounding happened), by about the type's precision.
TEST(Attention, NarrowKvCacheRoundsWhenStoredAndStaysFixed) {
  const std::vector<int64_t> lens = {1, 37, 300};
  const std::vector<float> q = RandomVector(lens.size() * 4 * 64, 8);
  const std::vector<std::pair<int, int32_t>> rows = {{0, 0}, {1, 36}, {2, 299}, {2, 17}};
  CpuBackend wide(2);
  const std::vector<float> f32 = testing::AttentionFixture(wide, lens).Run(rows, q, Schedule::kFixed);
  struct Case {
    KvDtype dtype;
    double precision;  // relative spacing of the type near 1
  };
  // The fixture's references use the keys and values rounded to the stored type.
  for (const Case& c : {Case{KvDtype::kF16, 0x1p-10}, Case{KvDtype::kBf16, 0x1p-7}}) {
    CpuBackend be(2, true, c.dtype), portable(1, false, c.dtype);
    EXPECT_EQ(be.kv_element_bytes(), 2u);
    testing::AttentionFixture f(be, lens), fp(portable, lens);
    const std::vector<float> fixed = f.Run(rows, q, Schedule::kFixed);
    EXPECT_TRUE(SameBits(fixed.data(), fp.Run(rows, q, Schedule::kFixed).data(), fixed.size()));
    for (size_t r = 0; r < rows.size(); ++r) {
      const std::vector<float> alone = f.Run({rows[r]}, q, Schedule::kFixed);
      EXPECT_TRUE(SameBits(alone.data(), fixed.data() + r * 256, 256)) << "row " << r;
    }
    double worst_vs_f32 = 0;
    for (Schedule s : {Schedule::kFast, Schedule::kFixed}) {
      const std::vector<float> out = f.Run(rows, q, s);
      for (size_t r = 0; r < rows.size(); ++r) {
        const auto [seq, pos] = rows[r];
        for (int64_t h = 0; h < 4; ++h) {
          const std::vector<double> ref = f.Reference(seq, pos + 1, h, q.data() + (seq * 4 + h) * 64);
          for (int64_t i = 0; i < 64; ++i) {
            const size_t at = r * 256 + static_cast<size_t>(h * 64 + i);
            ASSERT_NEAR(out[at], ref[static_cast<size_t>(i)], 1e-5) << "row " << r << " head " << h;
            worst_vs_f32 = std::max(worst_vs_f32, std::fabs(double{out[at]} - f32[at]));
          }
        }
      }
    }
    EXPECT_GT(worst_vs_f32, c.precision / 64);
    EXPECT_LT(worst_vs_f32, c.precision * 8);
  }
}

}  // namespace
}  // namespace llm42
