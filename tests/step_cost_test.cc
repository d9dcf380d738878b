// The step cost model and the decode-path choice it drives, on synthetic step timings.
#include "lib/engine/step_cost.h"

#include <algorithm>

#include "gtest/gtest.h"
#include "lib/engine/dvr_controller.h"

namespace llm42 {
namespace {

// A backend's made-up cost: a fixed per-step overhead, one more when any fixed rows run, and
// per-row and per-attended-position costs.
struct Costs {
  double step, fixed_step, fast_row, fixed_row, position;
  double operator()(const StepShape& s) const {
    return step + (s.fixed_rows > 0 ? fixed_step : 0) + fast_row * static_cast<double>(s.fast_rows) +
           fixed_row * static_cast<double>(s.fixed_rows) + position * static_cast<double>(s.attended);
  }
};

// Steps like an engine's under DVR: decode steps of 0..20 fast rows, every fourth step also
// verifying or prefilling 1..64 fixed rows; a little timing jitter.
void Feed(StepCostModel& m, const Costs& c, int steps) {
  for (int i = 0; i < steps; ++i) {
    StepShape s{(i * 7) % 21, i % 4 == 0 ? 1 + (i * 13) % 64 : 0, 1000 + (i * 389) % 5000};
    if (s.fast_rows + s.fixed_rows == 0) s.fast_rows = 1;
    const double jitter = 1 + 0.01 * ((i * 31) % 7 - 3) / 3.0;
    m.Observe(s, c(s) * jitter);
  }
}

TEST(StepCostModel, RecoversALinearCostFromTimedSteps) {
  const Costs c{2e-3, 4e-3, 1e-4, 2e-4, 1e-7};
  StepCostModel m;
  EXPECT_FALSE(m.Explored(8));
  Feed(m, c, 400);
  EXPECT_TRUE(m.Explored(8));
  for (const StepShape& s : {StepShape{10, 0, 3000}, StepShape{0, 16, 3000}, StepShape{16, 64, 8000}}) {
    EXPECT_NEAR(m.Predict(s), c(s), 0.03 * c(s)) << s.fast_rows << " fast, " << s.fixed_rows << " fixed";
  }
}

TEST(StepCostModel, KeepsWhatItLearnedAboutStepsItNoLongerSees) {
  const Costs c{2e-3, 4e-3, 1e-4, 2e-4, 1e-7};
  StepCostModel m;
  Feed(m, c, 400);
  // Then only all-fixed steps, as when every deterministic request decodes under fixed.
  for (int i = 0; i < 2000; ++i) {
    const StepShape s{0, 16, 4000};
    m.Observe(s, c(s));
  }
  const StepShape fast{16, 0, 4000};
  EXPECT_NEAR(m.Predict(fast), c(fast), 0.1 * c(fast));
}

DvrController Trained(const Costs& c, DecodePath path = DecodePath::kAuto) {
  static EngineStats stats;
  DeterminismPolicy p;
  p.decode_path = path;
  DvrController dvr(p, stats);
  for (int i = 0; i < 400; ++i) {
    StepShape s{4 + (i * 7) % 17, i % 4 == 0 ? 8 + (i * 13) % 57 : 0, 1000 + (i * 389) % 5000};
    dvr.ObserveStep(s, c(s));
  }
  return dvr;
}

// Where fixed rows cost about what fast ones do and nothing per step (the CPU backend, which
// streams each weight once for both), decoding under fixed saves the replay; where a fixed
// pass has a large per-step cost (padded fixed-shape GEMMs on a GPU) and few requests would
// share it, verifying later is cheaper.
TEST(DvrDecodePath, AutoPicksTheCheaperPathByMeasuredCost) {
  const StepShape rest{12, 0, 4000};
  EXPECT_TRUE(Trained(Costs{2e-3, 0, 1e-4, 1.2e-4, 1e-7}).DecodeDirect(4, rest, 512));
  EXPECT_FALSE(Trained(Costs{2e-3, 8e-3, 1e-4, 1.2e-4, 1e-7}).DecodeDirect(1, rest, 512));
  // With the fixed pass already in this step (a verify group rides along), it costs nothing more.
  EXPECT_TRUE(Trained(Costs{2e-3, 8e-3, 1e-4, 1.2e-4, 1e-7}).DecodeDirect(1, StepShape{12, 64, 4000}, 512));
}

// The CPU backend measured (llama-110m f16, 2 threads, 100 % deterministic): a decode step's
// first rows are GEMV rows that cost ~3.6 ms each, prefill and verify rows run through tiled
// GEMMs at ~0.5 ms each, and fixed rows cost what fast rows cost. A cost linear in rows cannot
// fit both; the model mistook the gap for a per-step cost of fixed rows (~5 ms) and sent
// one- and two-row steps through verification. Checked to fail with a model linear in rows
// (the one before the knot): DecodeDirect(1 or 2, ...) returned false.
TEST(DvrDecodePath, SmallBatchRowsCostingMoreThanLargeOnesAreNotAFixedStepCost) {
  const auto row_cost = [](int64_t rows) {
    constexpr int64_t kGemvRows = 6;
    return 3.6e-3 * static_cast<double>(std::min(rows, kGemvRows)) +
           0.5e-3 * static_cast<double>(std::max<int64_t>(rows - kGemvRows, 0));
  };
  // One weight pass per step shared by both schedules; rows of each schedule as above.
  const auto cost = [&](const StepShape& s) {
    return 5e-3 + row_cost(s.fast_rows) + row_cost(s.fixed_rows) + 1e-8 * static_cast<double>(s.attended);
  };
  EngineStats stats;
  DvrController dvr(DeterminismPolicy{}, stats);
  // What such a load runs: fast-only decode steps of 1..6 rows (candidates), fixed-only decode
  // steps of 1..6 rows (decoded under fixed), fixed prefill chunks of 20..120 rows, and verify
  // steps (fast decode rows beside 8..64 replay rows).
  for (int i = 0; i < 600; ++i) {
    const int64_t n = 1 + (i * 5) % 6;
    StepShape s{n, 0, 200 + (i * 37) % 300};
    switch (i % 5) {
      case 1: s = StepShape{0, n, s.attended}; break;
      case 2: s = StepShape{0, 20 + (i * 11) % 101, 3000}; break;
      case 3: s = StepShape{n, 8 + (i * 13) % 57, 2000}; break;
      default: break;
    }
    dvr.ObserveStep(s, cost(s));
  }
  for (int64_t n = 1; n <= 6; ++n) EXPECT_TRUE(dvr.DecodeDirect(n, StepShape{0, 0, 300}, 512)) << n << " rows";
}

// Before the steps have shown both kinds, the choice alternates so that they do.
TEST(DvrDecodePath, AlternatesUntilTheStepsHaveShownBothKinds) {
  EngineStats stats;
  DvrController dvr(DeterminismPolicy{}, stats);
  const bool first = dvr.DecodeDirect(4, StepShape{12, 0, 4000}, 512);
  EXPECT_NE(dvr.DecodeDirect(4, StepShape{12, 0, 4000}, 512), first);
  EXPECT_EQ(dvr.DecodeDirect(4, StepShape{12, 0, 4000}, 512), first);
}

TEST(DvrDecodePath, ForcedPathsIgnoreTheCosts) {
  const Costs cheap_fixed{2e-3, 0, 1e-4, 1e-4, 1e-7};
  EXPECT_FALSE(Trained(cheap_fixed, DecodePath::kVerify).DecodeDirect(4, StepShape{12, 0, 4000}, 512));
  const Costs dear_fixed{2e-3, 8e-3, 1e-4, 1e-3, 1e-7};
  EXPECT_TRUE(Trained(dear_fixed, DecodePath::kFixed).DecodeDirect(4, StepShape{12, 0, 4000}, 512));
}

}  // namespace
}  // namespace llm42
