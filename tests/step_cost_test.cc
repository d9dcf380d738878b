// The step cost model and the decode-path choice it drives, on synthetic step timings.
#include "lib/engine/step_cost.h"

#include <algorithm>

#include "gtest/gtest.h"
#include "lib/engine/dvr_controller.h"

namespace llm42 {
namespace {

// A backend's made-up cost: a per-pass overhead (one pass per schedule with rows), what a fixed
// pass adds, what running both schedules in one step adds (negative where the backend streams
// the weights once for both, as the CPU does), and per-row and per-attended-position costs.
struct Costs {
  double pass, fixed_pass, both, fast_row, fixed_row, position;
  double operator()(const StepShape& s) const {
    const bool fast = s.fast_rows > 0, fixed = s.fixed_rows > 0;
    return pass * ((fast ? 1 : 0) + (fixed ? 1 : 0)) + (fixed ? fixed_pass : 0) + (fast && fixed ? both : 0) +
           fast_row * static_cast<double>(s.fast_rows) + fixed_row * static_cast<double>(s.fixed_rows) +
           position * static_cast<double>(s.attended);
  }
};
// The CPU: one weight stream for both schedules, but a step of both converts and tiles the
// weights twice (a_both above -a); a fixed row costs what a fast one does.
constexpr Costs kCpuLike{4e-3, 0, -3e-3, 1e-4, 1e-4, 1e-7};
// A GPU: a fixed pass is a second, padded pass of GEMMs, dearer than a fast one.
constexpr Costs kGpuLike{2e-3, 6e-3, 0, 1e-5, 2e-5, 1e-8};

// Steps of every kind an engine runs: fast-only decode steps, fixed-only steps (deterministic
// prefill, decode under fixed), and steps with both (verification or direct decode beside plain
// rows); a little timing jitter.
void Feed(StepCostModel& m, const Costs& c, int steps) {
  for (int i = 0; i < steps; ++i) {
    StepShape s{1 + (i * 7) % 20, 1 + (i * 13) % 64, 1000 + (i * 389) % 5000};
    if (i % 3 == 0) s.fixed_rows = 0;
    if (i % 3 == 1) s.fast_rows = 0;
    const double jitter = 1 + 0.01 * ((i * 31) % 7 - 3) / 3.0;
    m.Observe(s, c(s) * jitter);
  }
}

TEST(StepCostModel, RecoversThePassAndRowCostsFromTimedSteps) {
  for (const Costs& c : {kCpuLike, kGpuLike}) {
    StepCostModel m;
    EXPECT_EQ(m.seen(StepCostModel::Kind::kBoth), 0);
    Feed(m, c, 600);
    EXPECT_EQ(m.seen(StepCostModel::Kind::kFastOnly), 200);
    for (const StepShape& s : {StepShape{10, 0, 3000}, StepShape{0, 16, 3000}, StepShape{16, 4, 8000}}) {
      EXPECT_NEAR(m.Predict(s), c(s), 0.03 * c(s)) << s.fast_rows << " fast, " << s.fixed_rows << " fixed";
    }
  }
}

TEST(StepCostModel, KeepsWhatItLearnedAboutStepsItNoLongerSees) {
  StepCostModel m;
  Feed(m, kGpuLike, 600);
  // Then only all-fixed steps, as when every deterministic request decodes under fixed.
  for (int i = 0; i < 2000; ++i) {
    const StepShape s{0, 16, 4000};
    m.Observe(s, kGpuLike(s));
  }
  const StepShape fast{16, 0, 4000}, both{12, 4, 4000};
  EXPECT_NEAR(m.Predict(fast), kGpuLike(fast), 0.1 * kGpuLike(fast));
  EXPECT_NEAR(m.Predict(both), kGpuLike(both), 0.1 * kGpuLike(both));
}

// A session that has run only fixed-only steps (the first steps of a burst of deterministic
// requests: their prefill, then decode under fixed) predicts a fast step of the same rows at
// the same cost: the schedules' differences stay at 0 until steps show them, rather than
// splitting the fixed steps' cost between the pass and the fixed pass at random. Fails with the
// differences ridged towards their previous value as weakly as the rest.
TEST(StepCostModel, UnseenScheduleDifferencesStayZero) {
  StepCostModel m;
  for (int i = 0; i < 300; ++i) {
    const StepShape s{0, 1 + (i * 5) % 16, 500 + (i * 37) % 3000};
    m.Observe(s, 5e-3 + 4e-4 * static_cast<double>(s.fixed_rows) + 1e-8 * static_cast<double>(s.attended));
  }
  for (int64_t n : {2, 8, 16}) {
    const double fixed = m.Predict(StepShape{0, n, 1500}), fast = m.Predict(StepShape{n, 0, 1500});
    EXPECT_NEAR(fast, fixed, 0.02 * fixed) << n << " rows";
  }
}

using Choice = DvrController::DecodeChoice;

// Steps of all three kinds, as a session with plain and deterministic requests runs them.
DvrController Trained(const Costs& c, DecodePath path = DecodePath::kAuto) {
  static EngineStats stats;
  DeterminismPolicy p;
  p.decode_path = path;
  DvrController dvr(p, stats);
  for (int i = 0; i < 600; ++i) {
    StepShape s{4 + (i * 7) % 17, 8 + (i * 13) % 57, 1000 + (i * 389) % 5000};
    if (i % 4 == 0) s.fixed_rows = 0;
    if (i % 4 == 1) s.fixed_rows = 1 + i % 4;  // decode under fixed beside plain rows
    if (i % 4 == 2) s = StepShape{0, s.fast_rows, s.attended};  // every decode row under fixed
    dvr.ObserveStep(s, i % 4 == 3 ? s.fixed_rows : 0, c(s));
  }
  return dvr;
}

// The steady state's choice, read past the exploring choices (every kExplorePeriod-th).
Choice Steady(DvrController& dvr, int64_t n, int64_t clean, const StepShape& rest, int64_t plain_decodes) {
  int counts[3] = {};
  constexpr int kCalls = 3 * DvrController::kExplorePeriod;
  for (int i = 0; i < kCalls; ++i) ++counts[static_cast<int>(dvr.ChooseDecode(n, clean, rest, plain_decodes, 512))];
  return static_cast<Choice>(std::max_element(counts, counts + 3) - counts);
}

// Beside plain rows the measured costs decide. Where a fixed row costs what a fast one does and
// one schedule per step saves the second family's work (the CPU), every decode row under fixed
// saves that and the replay; where a fixed pass is a second, dearer pass of GEMMs (a GPU) and a few rows would pay
// for it, verifying later is cheaper — unless the step runs a fixed pass anyway (a verify group
// rides along); where a fixed pass costs what a fast one does but fixed rows cost more, only the
// deterministic rows go fixed.
TEST(DvrDecodePath, BesidePlainRowsTheMeasuredCostsDecide) {
  const StepShape rest{12, 0, 4000};
  DvrController cpu = Trained(kCpuLike);
  EXPECT_EQ(Steady(cpu, 4, 4, rest, 12), Choice::kAllFixed);
  DvrController gpu = Trained(kGpuLike);
  EXPECT_EQ(Steady(gpu, 2, 2, rest, 12), Choice::kCandidates);
  EXPECT_EQ(Steady(gpu, 2, 2, StepShape{12, 64, 4000}, 12), Choice::kDirect);
  // Rows holding candidates cannot ride along; the others still do.
  EXPECT_EQ(Steady(gpu, 2, 0, StepShape{12, 64, 4000}, 12), Choice::kCandidates);
  DvrController dear_rows = Trained(Costs{4e-3, 0, -4e-3, 1e-4, 4e-4, 1e-7});  // pass shared, dear fixed rows
  EXPECT_EQ(Steady(dear_rows, 2, 2, rest, 12), Choice::kDirect);
}

// A step of deterministic rows alone is a batch_invariant step whatever the costs say: the
// alternative computes each token twice. From the first step, with nothing measured.
TEST(DvrDecodePath, DeterministicRowsAloneConvergeOnFixed) {
  EngineStats stats;
  DvrController fresh(DeterminismPolicy{}, stats);
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(fresh.ChooseDecode(8, 8 - i % 3, StepShape{0, 0, 900}, 0, 512), Choice::kDirect) << i;
  }
  DvrController gpu = Trained(kGpuLike);
  EXPECT_EQ(gpu.ChooseDecode(3, 3, StepShape{0, 40, 900}, 0, 512), Choice::kDirect);
}

// Before the steps have shown the shapes compared, beside plain rows: keep the windows, ride
// along a fixed pass the step runs anyway, and explore the others every fourth choice.
TEST(DvrDecodePath, UntilTheShapesAreKnownKeepTheWindowsAndExplore) {
  EngineStats stats;
  DvrController dvr(DeterminismPolicy{}, stats);
  int counts[3] = {};
  for (int i = 0; i < 16; ++i) ++counts[static_cast<int>(dvr.ChooseDecode(2, 2, StepShape{10, 0, 900}, 10, 512))];
  EXPECT_EQ(counts[0], 12);
  EXPECT_EQ(counts[1], 2) << "every fourth choice explores, in turn";
  EXPECT_EQ(counts[2], 2);
  EXPECT_EQ(dvr.ChooseDecode(2, 2, StepShape{10, 30, 900}, 10, 512), Choice::kDirect);
  EXPECT_EQ(dvr.ChooseDecode(2, 2, StepShape{10, 30, 900}, 10, 512), Choice::kDirect);
}

// A trained controller still explores, every kExplorePeriod-th choice, each other choice in turn.
TEST(DvrDecodePath, KnownCostsStillExploreTheOthers) {
  DvrController gpu = Trained(kGpuLike);
  int counts[3] = {};
  for (int i = 0; i < 4 * DvrController::kExplorePeriod; ++i) {
    ++counts[static_cast<int>(gpu.ChooseDecode(2, 2, StepShape{12, 0, 4000}, 12, 512))];
  }
  EXPECT_EQ(counts[0], 4 * DvrController::kExplorePeriod - 4);
  EXPECT_EQ(counts[1], 2);
  EXPECT_EQ(counts[2], 2);
}

TEST(DvrDecodePath, ForcedPathsIgnoreTheCosts) {
  EXPECT_EQ(Trained(kCpuLike, DecodePath::kVerify).ChooseDecode(4, 4, StepShape{12, 0, 4000}, 12, 512),
            Choice::kCandidates);
  EXPECT_EQ(Trained(kCpuLike, DecodePath::kVerify).ChooseDecode(4, 4, StepShape{0, 0, 4000}, 0, 512),
            Choice::kCandidates);
  EXPECT_EQ(Trained(kGpuLike, DecodePath::kFixed).ChooseDecode(4, 4, StepShape{12, 0, 4000}, 12, 512),
            Choice::kDirect);
}

}  // namespace
}  // namespace llm42
