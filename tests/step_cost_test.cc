// The step cost model and the decode-path choice it drives, on synthetic step timings.
#include "lib/engine/step_cost.h"

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

// Steps like an engine's under DVR: decode steps of 4..20 fast rows, every fourth step also
// verifying 8..64 fixed rows; a little timing jitter.
void Feed(StepCostModel& m, const Costs& c, int steps) {
  for (int i = 0; i < steps; ++i) {
    StepShape s{4 + (i * 7) % 17, i % 4 == 0 ? 8 + (i * 13) % 57 : 0, 1000 + (i * 389) % 5000};
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
