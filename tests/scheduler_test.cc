// The step planner alone, over a real paged KV cache with sequences put in the states the engine
// leaves them in (no model).
#include "lib/engine/scheduler.h"

#include <algorithm>

#include "gtest/gtest.h"
#include "lib/kv/kv_cache.h"
#include "tests/fake_model.h"

namespace llm42 {
namespace {

using testing::FakeModel;

class SchedulerTest : public ::testing::Test {
 protected:
  void Start(SchedulerLimits limits) { scheduler_ = std::make_unique<Scheduler>(limits, cache_, stats_); }

  // A running plain request that is decoding (its prompt in the cache).
  Sequence* Decoding(int prompt = 8) {
    auto s = FakeModel::MakeSequence(std::vector<int32_t>(static_cast<size_t>(prompt), 5), 100, false,
                                     arrival_++, 64);
    Sequence* raw = s.get();
    scheduler_->Enqueue(std::move(s));
    scheduler_->Admit();
    raw->tokens.push_back(6);  // the first sampled token, not yet fed
    raw->n_committed = raw->tokens.size();
    raw->n_computed = prompt;
    EXPECT_TRUE(cache_.Reserve(raw->kv_seq, raw->n_computed));
    return raw;
  }

  // A running deterministic request holding `candidates` unverified tokens, ready.
  Sequence* Ready(int64_t candidates, int prompt = 8) {
    auto s = FakeModel::MakeSequence(std::vector<int32_t>(static_cast<size_t>(prompt), 5), 1000, true,
                                     arrival_++, 64);
    Sequence* raw = s.get();
    scheduler_->Enqueue(std::move(s));
    scheduler_->Admit();
    raw->tokens.push_back(6);  // committed by the fixed prefill
    raw->n_committed = raw->tokens.size();
    for (int64_t i = 0; i < candidates; ++i) raw->tokens.push_back(7);
    raw->n_computed = static_cast<int64_t>(raw->tokens.size()) - 1;
    raw->ready = true;
    EXPECT_TRUE(cache_.Reserve(raw->kv_seq, raw->n_computed));
    return raw;
  }

  static int64_t Rows(const std::vector<PlanEntry>& plan, const Sequence* s, RowKind kind) {
    int64_t n = 0;
    for (const PlanEntry& e : plan) n += e.seq == s && e.kind == kind ? e.n : 0;
    return n;
  }

  KvCache cache_{4096, 4};
  EngineStats stats_;
  std::unique_ptr<Scheduler> scheduler_;
  uint64_t arrival_ = 0;
};

// docs/determinism-tests.md item 10 at the planner: with the default knobs a full verify group (8 x 64
// rows) would fill the 512-row batch by itself. The planner used to place verification first;
// put step 2 of Scheduler::Plan before step 1 and the plain request gets no row here.
TEST_F(SchedulerTest, EveryDecodingRequestGetsItsRowBeforeVerification) {
  Start({512, 32, 8});
  std::vector<Sequence*> ready;
  for (int i = 0; i < 16; ++i) ready.push_back(Ready(64));
  Sequence* plain = Decoding();
  const std::vector<PlanEntry> plan = scheduler_->Plan();
  EXPECT_EQ(Rows(plan, plain, RowKind::kDecode), 1);
  int64_t verify = 0, verified_requests = 0;
  for (Sequence* s : ready) {
    const int64_t n = Rows(plan, s, RowKind::kVerify);
    verify += n;
    verified_requests += n > 0;
  }
  EXPECT_EQ(verify, 511) << "verification takes all that is left";
  EXPECT_EQ(verified_requests, 8) << "at most one verify group per step";
  // The oldest seven whole, each with the row after its window, the eighth in part.
  EXPECT_EQ(Rows(plan, ready[0], RowKind::kVerify), 65);
  EXPECT_EQ(Rows(plan, ready[7], RowKind::kVerify), 511 - 7 * 65);
  for (const PlanEntry& e : plan) {
    if (e.kind == RowKind::kVerify) {
      EXPECT_EQ(e.begin, e.seq->n_committed - 1);
    }
  }
}

TEST_F(SchedulerTest, VerificationProgressesWhenDecodeRowsFillTheBatch) {
  Start({4, 32, 8});
  std::vector<Sequence*> plain;
  for (int i = 0; i < 6; ++i) plain.push_back(Decoding());
  Sequence* ready = Ready(8);
  const std::vector<PlanEntry> plan = scheduler_->Plan();
  EXPECT_EQ(Rows(plan, ready, RowKind::kVerify), 1);
  int64_t decode = 0;
  for (Sequence* s : plain) decode += Rows(plan, s, RowKind::kDecode);
  EXPECT_EQ(decode, 3);
  EXPECT_EQ(Rows(plan, plain[0], RowKind::kDecode), 1) << "the oldest decode first";
}

TEST_F(SchedulerTest, NoReadyRequestMeansNoReservedVerifyRow) {
  Start({4, 32, 8});
  std::vector<Sequence*> plain;
  for (int i = 0; i < 6; ++i) plain.push_back(Decoding());
  EXPECT_EQ(scheduler_->Plan().size(), 4u);
}

TEST_F(SchedulerTest, PrefillTakesWhatDecodeAndVerifyLeave) {
  Start({40, 32, 8});
  Sequence* plain = Decoding();
  Sequence* ready = Ready(16);
  auto fresh = FakeModel::MakeSequence(std::vector<int32_t>(100, 5), 10, false, arrival_++, 64);
  Sequence* prompt = fresh.get();
  scheduler_->Enqueue(std::move(fresh));
  scheduler_->Admit();
  const std::vector<PlanEntry> plan = scheduler_->Plan();
  EXPECT_EQ(Rows(plan, plain, RowKind::kDecode), 1);
  EXPECT_EQ(Rows(plan, ready, RowKind::kVerify), 16 + 1);  // the window and the row after it
  EXPECT_EQ(Rows(plan, prompt, RowKind::kPrefill), 40 - 1 - 17);
}

TEST_F(SchedulerTest, CancelledRequestsLeaveBothQueuesWithTheirBlocks) {
  Start({64, 1, 8});
  Sequence* running = Decoding();
  auto queued = FakeModel::MakeSequence({1, 2, 3}, 10, false, arrival_++, 64);
  queued->request->Cancel();
  scheduler_->Enqueue(std::move(queued));
  running->request->Cancel();
  const auto cancelled = scheduler_->TakeCancelled();
  EXPECT_EQ(cancelled.size(), 2u);
  EXPECT_TRUE(scheduler_->idle());
  EXPECT_EQ(cache_.free_blocks(), cache_.n_blocks());
}

}  // namespace
}  // namespace llm42
