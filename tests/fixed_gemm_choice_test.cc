// How a device backend picks its fixed GEMM per weight shape (lib/backend/fixed_gemm_choice.h),
// against a fake device whose "algorithms" really compute the GEMM, each in its own order of
// additions: splitting k into s parts summed separately changes the bits, as a GPU library's
// split-K or stream-K kernels do, so a choice that lets a row's split depend on the row count
// produces rows that really differ. The property that matters is checked last
// (RunningThroughTheChoiceIsRowInvariant): every row of a call made as the choice says equals
// that row computed alone. These tests fail on a broken chooser: one that checked only the
// reference's row count (LibraryChoice taking the first candidate per row count unchecked) fails
// RowCountsWhoseBestAlgorithmSplitsKTakeOneThatAgrees and the invariance test; one that skipped
// the tensor-core kernel's agreement with the FMA chains fails AWrongTensorCoreKernel....
#include "lib/backend/fixed_gemm_choice.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <utility>

#include "gtest/gtest.h"
#include "lib/numerics/portable_math.h"

namespace llm42 {
namespace {

constexpr int64_t kN = 24, kK = 96;

// One library algorithm of the fake: how many parts it splits k into at m rows (1: one chain),
// and the row counts it refuses.
struct FakeAlgo {
  std::function<int(int64_t m)> splits = [](int64_t) { return 1; };
  std::function<bool(int64_t m)> supports = [](int64_t) { return true; };
};

class FakeDevice : public FixedGemmDevice {
 public:
  FakeDevice() : x_(FixedGemmCheckInput(kK)), w_(static_cast<size_t>(kN * kK)) {
    uint32_t r = 12345;
    for (float& v : w_) {
      r = r * 1664525u + 1013904223u;
      v = static_cast<float>(r >> 8) * 0x1.0p-24f - 0.5f;
    }
  }

  std::map<int, FakeAlgo> algos;
  // The library's candidates for m rows, best first.
  std::function<std::vector<int>(int64_t m)> candidates = [](int64_t) { return std::vector<int>{0}; };
  // The tensor-core kernel: k in chunks of tc_chunk(m) (16 is right), and whether it drops the
  // last chunk (a wrong kernel).
  std::function<int(int64_t m)> tc_chunk = [](int64_t) { return 16; };
  bool tc_drops_last_chunk = false;
  bool fail = false;  // every Run is a device error
  int library_queries = 0;
  std::vector<std::pair<GemmWay, int64_t>> runs;

  absl::StatusOr<std::vector<int>> LibraryCandidates(int64_t m) override {
    ++library_queries;
    return candidates(m);
  }

  absl::StatusOr<GemmRun> Run(const GemmWay& way, int64_t m, std::span<const int64_t> rows) override {
    if (fail) return absl::InternalError("the fake device fell over");
    runs.emplace_back(way, m);
    GemmRun out;
    if (way.kind == GemmWay::Kind::kLibrary && !algos.at(way.algo).supports(m)) {
      out.refused = "not supported at m = " + std::to_string(m);
      return out;
    }
    for (int64_t r : rows) {
      EXPECT_LT(r, m);
      for (int64_t j = 0; j < kN; ++j) out.rows.push_back(Output(way, m, r, j));
    }
    return out;
  }

  // Output (r, j) of an m-row run of `way`: the check input's row r % kFixedGemmCheckRows.
  float Output(const GemmWay& way, int64_t m, int64_t r, int64_t j) const {
    const float* x = x_.data() + (r % kFixedGemmCheckRows) * kK;
    const float* w = w_.data() + j * kK;
    switch (way.kind) {
      case GemmWay::Kind::kFmaChain: {
        float acc = 0;
        for (int64_t i = 0; i < kK; ++i) acc = PortableFmaf(x[i], w[i], acc);
        return acc;
      }
      case GemmWay::Kind::kTensorCore: {
        const int64_t chunk = tc_chunk(m);
        return ChunkedDot(x, w, chunk, tc_drops_last_chunk ? kK - chunk : kK);
      }
      case GemmWay::Kind::kLibrary: {
        const int64_t parts = algos.at(way.algo).splits(m);
        return ChunkedDot(x, w, (kK + parts - 1) / parts, kK);
      }
    }
    return 0;
  }

 private:
  // The dot product of the first `end` elements, summed in chunks of `chunk`, then the chunks'
  // sums in order.
  static float ChunkedDot(const float* x, const float* w, int64_t chunk, int64_t end) {
    float acc = 0;
    for (int64_t c = 0; c < end; c += chunk) {
      float part = 0;
      for (int64_t i = c; i < std::min(c + chunk, end); ++i) part += x[i] * w[i];
      acc += part;
    }
    return acc;
  }

  std::vector<float> x_, w_;
};

// Every output row of a call of m rows made as `choice` says (its chunks, padded, each run by
// its way), as bits.
std::vector<uint32_t> CallThroughChoice(const FakeDevice& d, const FixedGemmChoice& choice, int64_t m) {
  std::vector<uint32_t> bits;
  for (const FixedGemmChoice::Chunk& c : choice.Chunks(m)) {
    for (int64_t r = 0; r < c.rows; ++r) {
      for (int64_t j = 0; j < kN; ++j) {
        // The call's row first_row + r is the chunk's row r: input row (first_row + r) % 256.
        const float v = d.Output(c.way, c.padded_rows, (c.first_row + r) % kFixedGemmCheckRows, j);
        uint32_t u;
        std::memcpy(&u, &v, 4);
        bits.push_back(u);
      }
    }
  }
  return bits;
}

absl::StatusOr<FixedGemmChoice> Choose(FakeDevice& d, FixedGemmForce force = FixedGemmForce::kNone) {
  return ChooseFixedGemm(d, kN, FixedGemmMaxRows(kN), force);
}

// The library offers algorithm `id` first at every row count, then the invariant algorithm 0.
void OfferFirst(FakeDevice& d, int id, FakeAlgo algo) {
  d.algos[0] = {};
  d.algos[id] = std::move(algo);
  d.candidates = [id](int64_t) { return std::vector<int>{id, 0}; };
}

// Every row count of `c` runs library algorithm algo_at(row count).
void ExpectLibraryAlgos(const FixedGemmChoice& c, const std::function<int(int64_t)>& algo_at) {
  ASSERT_EQ(c.ways.size(), c.rows.size());
  for (size_t i = 0; i < c.rows.size(); ++i) {
    EXPECT_EQ(c.ways[i].kind, GemmWay::Kind::kLibrary);
    EXPECT_EQ(c.ways[i].algo, algo_at(c.rows[i])) << c.rows[i] << " rows";
  }
}

TEST(FixedGemmChoice, RowCountsAndTheLargestCall) {
  const std::vector<int64_t> b = FixedGemmBuckets(2048);
  ASSERT_EQ(b.size(), 7u + 31u);
  EXPECT_EQ(std::vector<int64_t>(b.begin(), b.begin() + 9), (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 128, 192}));
  EXPECT_EQ(b.back(), 2048);
  EXPECT_EQ(FixedGemmBuckets(40), (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 40}));
  // 256 MiB of f32 outputs: 2048 rows of a 4096-wide weight fit; a 128256-token head's 512 rows
  // (523 would fit: a multiple of 64); at least 64 rows whatever the width.
  EXPECT_EQ(FixedGemmMaxRows(4096), 2048);
  EXPECT_EQ(FixedGemmMaxRows(14336), 2048);
  EXPECT_EQ(FixedGemmMaxRows(128256), 512);
  EXPECT_EQ(FixedGemmMaxRows(int64_t{1} << 30), 64);
}

TEST(FixedGemmChoice, ChunksPadToTheNextCheckedRowCount) {
  FixedGemmChoice c;
  c.rows = {1, 2, 4, 8, 64, 128};
  c.ways = {{GemmWay::Kind::kLibrary, 5}, {GemmWay::Kind::kLibrary, 5}, {GemmWay::Kind::kLibrary, 5},
            {GemmWay::Kind::kLibrary, 6}, {GemmWay::Kind::kLibrary, 6}, {GemmWay::Kind::kLibrary, 7}};
  c.max_rows = 128;
  auto chunks = c.Chunks(3);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].rows, 3);
  EXPECT_EQ(chunks[0].padded_rows, 4);
  EXPECT_EQ(chunks[0].way.algo, 5);
  chunks = c.Chunks(300);  // 128 + 128 + 44 (padded to 64)
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[1].first_row, 128);
  EXPECT_EQ(chunks[1].padded_rows, 128);
  EXPECT_EQ(chunks[1].way.algo, 7);
  EXPECT_EQ(chunks[2].first_row, 256);
  EXPECT_EQ(chunks[2].rows, 44);
  EXPECT_EQ(chunks[2].padded_rows, 64);
  EXPECT_EQ(chunks[2].way.algo, 6);
  EXPECT_EQ(c.PaddedRows(300), 320);
  EXPECT_EQ(c.PaddedRows(3), 4);
  EXPECT_EQ(c.PaddedRows(128), 128);
  // One way, no row counts: any call as it is, in chunks of max_rows.
  FixedGemmChoice own;
  own.ways = {{GemmWay::Kind::kTensorCore}};
  own.max_rows = 64;
  chunks = own.Chunks(100);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[1].rows, 36);
  EXPECT_EQ(chunks[1].padded_rows, 36);
  EXPECT_EQ(chunks[1].way.kind, GemmWay::Kind::kTensorCore);
  EXPECT_EQ(own.PaddedRows(100), 100);
}

TEST(FixedGemmChoice, OneInvariantAlgorithmServesEveryRowCount) {
  FakeDevice d;
  d.algos[0] = {};
  auto c = Choose(d);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rows, FixedGemmBuckets(FixedGemmMaxRows(kN)));
  ExpectLibraryAlgos(*c, [](int64_t) { return 0; });
  EXPECT_FALSE(c->fallback);
  EXPECT_NE(c->why.find("library algo 0 over 38 row counts"), std::string::npos) << c->why;
  // Every (way, row count) ran once.
  std::set<std::pair<int, int64_t>> seen;
  for (const auto& [way, m] : d.runs) EXPECT_TRUE(seen.emplace(way.algo, m).second) << way.algo << " at " << m;
}

// The library's best kernel at small row counts splits k (different bits); the chooser takes,
// there, another candidate with the reference's bits.
TEST(FixedGemmChoice, RowCountsWhoseBestAlgorithmSplitsKTakeOneThatAgrees) {
  FakeDevice d;
  OfferFirst(d, 1, {[](int64_t m) { return m <= 64 ? 4 : 1; }});
  // The fake is sensitive: algorithm 1 at one row gives other bits than at 256.
  ASSERT_NE(d.Output({GemmWay::Kind::kLibrary, 1}, 1, 0, 0), d.Output({GemmWay::Kind::kLibrary, 1}, 256, 0, 0));
  auto c = Choose(d);
  ASSERT_TRUE(c.ok()) << c.status();
  ExpectLibraryAlgos(*c, [](int64_t rows) { return rows <= 64 ? 0 : 1; });
  EXPECT_NE(c->why.find("library algos 0, 1 over 38 row counts to 2048, checked against library algo 1"),
            std::string::npos)
      << c->why;
}

// A reference whose bits no algorithm reproduces at some row count is replaced by the next.
TEST(FixedGemmChoice, AReferenceNoRowCountReproducesIsReplaced) {
  FakeDevice d;
  OfferFirst(d, 2, {[](int64_t m) { return m >= 256 ? 3 : 1; }});
  auto c = Choose(d);
  ASSERT_TRUE(c.ok()) << c.status();
  ExpectLibraryAlgos(*c, [](int64_t rows) { return rows >= 256 ? 0 : 2; });
  EXPECT_NE(c->why.find("checked against library algo 0"), std::string::npos) << c->why;
  EXPECT_NE(c->why.find("not reference library algo 2: at 1 rows none of 2 algorithms reproduces its rows"),
            std::string::npos)
      << c->why;
}

// A candidate the library refuses at some row count (unsupported, wants a workspace) is passed over there.
TEST(FixedGemmChoice, RefusedRowCountsTakeAnotherAlgorithm) {
  FakeDevice d;
  OfferFirst(d, 1, {[](int64_t) { return 1; }, [](int64_t m) { return m <= 512; }});
  auto c = Choose(d);
  ASSERT_TRUE(c.ok()) << c.status();
  ExpectLibraryAlgos(*c, [](int64_t rows) { return rows <= 512 ? 1 : 0; });
}

TEST(FixedGemmChoice, NoInvariantLibraryAlgorithmMeansTheTensorCoreKernel) {
  FakeDevice d;
  // Algorithm a splits k into a + 1 parts, and a + 5 at one row: no algorithm has any
  // reference's bits at one row.
  for (int a : {0, 1, 2, 3}) d.algos[a] = {[a](int64_t m) { return m == 1 ? a + 5 : a + 1; }};
  d.candidates = [](int64_t) { return std::vector<int>{0, 1, 2, 3}; };
  auto c = Choose(d);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->ways.size(), 1u);
  EXPECT_EQ(c->ways[0].kind, GemmWay::Kind::kTensorCore);
  EXPECT_TRUE(c->rows.empty());
  EXPECT_FALSE(c->fallback);
  EXPECT_EQ(c->max_rows, FixedGemmMaxRows(kN));
  // Three references tried, each named with where it failed.
  for (int a : {0, 1, 2}) {
    EXPECT_NE(c->why.find("reference library algo " + std::to_string(a) + ": at "), std::string::npos) << c->why;
  }
  EXPECT_EQ(c->why.find("reference library algo 3"), std::string::npos) << c->why;
  EXPECT_EQ(c->why.rfind("tensor-core kernel: ", 0), 0u) << c->why;
}

TEST(FixedGemmChoice, AWrongTensorCoreKernelFallsToTheFmaChains) {
  FakeDevice d;
  d.candidates = [](int64_t) { return std::vector<int>{}; };
  d.tc_drops_last_chunk = true;  // invariant, and wrong
  auto c = Choose(d);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->ways.size(), 1u);
  EXPECT_EQ(c->ways[0].kind, GemmWay::Kind::kFmaChain);
  EXPECT_TRUE(c->fallback);
  EXPECT_NE(c->why.find("library: no algorithm for 256 rows"), std::string::npos) << c->why;
  EXPECT_NE(c->why.find("where the FMA chains give"), std::string::npos) << c->why;
}

TEST(FixedGemmChoice, ATensorCoreKernelThatVariesFallsToTheFmaChains) {
  FakeDevice d;
  d.candidates = [](int64_t) { return std::vector<int>{}; };
  d.tc_chunk = [](int64_t m) { return m < 64 ? 16 : 32; };
  auto c = Choose(d);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->ways[0].kind, GemmWay::Kind::kFmaChain);
  EXPECT_NE(c->why.find("tensor-core kernel: row 0 of 1 differs"), std::string::npos) << c->why;
}

TEST(FixedGemmChoice, ForcedChoicesSkipWhatTheyMust) {
  FakeDevice d;
  d.algos[0] = {};
  auto own = Choose(d, FixedGemmForce::kOwnKernels);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(own->ways[0].kind, GemmWay::Kind::kTensorCore);
  EXPECT_EQ(own->why, "tensor-core kernel (forced)");
  EXPECT_EQ(d.library_queries, 0);
  d.runs.clear();
  auto fma = Choose(d, FixedGemmForce::kFmaChain);
  ASSERT_TRUE(fma.ok()) << fma.status();
  EXPECT_EQ(fma->ways[0].kind, GemmWay::Kind::kFmaChain);
  EXPECT_TRUE(d.runs.empty()) << "the FMA chains are not checked";
}

TEST(FixedGemmChoice, DeviceErrorsAreReturned) {
  FakeDevice d;
  d.algos[0] = {};
  d.fail = true;
  auto c = Choose(d);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("fell over"), std::string::npos);
}

// The property the choice exists for, over calls of 1 to 700 rows (chunks of 64 past max_rows on
// a device whose check output allows only 64): every row of a call made as the choice says has
// the bits of that row computed alone. The last case's library varies with the row count in
// three ways at once (the best algorithm splits k at small counts, the reference refuses large
// ones); the control shows that taking the library's best per row count, unchecked, is not
// invariant.
TEST(FixedGemmChoice, RunningThroughTheChoiceIsRowInvariant) {
  FakeDevice d;
  OfferFirst(d, 1, {[](int64_t m) { return m <= 16 ? 2 : 1; }, [](int64_t m) { return m <= 1024; }});
  for (int64_t max_rows : {FixedGemmMaxRows(kN), int64_t{64}}) {  // the second: calls chunk
    auto c = ChooseFixedGemm(d, kN, max_rows, FixedGemmForce::kNone);
    ASSERT_TRUE(c.ok()) << c.status();
    const std::vector<uint32_t> all = CallThroughChoice(d, *c, 700);
    for (int64_t m : {1, 2, 3, 5, 16, 17, 63, 64, 65, 255, 256, 300, 513, 700}) {
      const std::vector<uint32_t> part = CallThroughChoice(d, *c, m);
      ASSERT_EQ(part.size(), static_cast<size_t>(m * kN));
      EXPECT_TRUE(std::equal(part.begin(), part.end(), all.begin())) << m << " rows, max_rows " << c->max_rows;
    }
    // Control: the library's first candidate per row count, unchecked.
    FixedGemmChoice unchecked = *c;
    for (GemmWay& w : unchecked.ways) w = {GemmWay::Kind::kLibrary, 1};
    const std::vector<uint32_t> one = CallThroughChoice(d, unchecked, 1);
    EXPECT_FALSE(std::equal(one.begin(), one.end(), CallThroughChoice(d, unchecked, 64).begin()))
        << "the control did not vary: the check proves nothing";
  }
}

}  // namespace
}  // namespace llm42
