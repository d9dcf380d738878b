// Windows, verification and rollback of one deterministic request, with hand-made logits.
#include "lib/engine/dvr_controller.h"

#include "gtest/gtest.h"
#include "lib/kv/kv_cache.h"
#include "tests/fake_model.h"

namespace llm42 {
namespace {

using testing::FakeModel;

class DvrControllerTest : public ::testing::Test {
 protected:
  DvrControllerTest() {
    policy_.window = 16;
    seq_ = FakeModel::MakeSequence({1, 5, 6}, 1000, true, 0, policy_.window);
    seq_->kv_seq = cache_.Create();
    seq_->tokens.push_back(9);  // committed by the fixed prefill
    seq_->n_committed = 4;
    seq_->n_computed = 3;
  }

  // Decodes candidates the way the engine does: each one fed (its K/V reserved) and added.
  void AddCandidates(DvrController& dvr, const std::vector<int32_t>& tokens, double margin = 1.0) {
    for (int32_t t : tokens) {
      ++seq_->n_computed;
      ASSERT_TRUE(cache_.Reserve(seq_->kv_seq, seq_->n_computed));
      dvr.AddCandidate(*seq_, t, margin, false);
    }
  }

  // A replay drawing `tokens[j]` at row j, with logprob -j.
  DvrController::ReplayRows Rows(std::vector<int32_t> tokens) {
    return [tokens = std::move(tokens)](int64_t j) {
      return DvrController::ReplayDraw{tokens[static_cast<size_t>(j)], -static_cast<float>(j), {}, false};
    };
  }

  // What the engine does with a verdict: commit (CommitTokens keeps the committed prefix and
  // appends), then settle.
  void Commit(DvrController& dvr, const DvrController::Verdict& v) {
    std::vector<int32_t> rest;
    if (!v.disagreed) rest.assign(seq_->tokens.begin() + seq_->n_committed + v.verified, seq_->tokens.end());
    dvr.Count(*seq_, v);
    seq_->tokens.resize(static_cast<size_t>(seq_->n_committed));
    for (int32_t t : v.tokens) seq_->tokens.push_back(t);
    seq_->n_committed += static_cast<int64_t>(v.tokens.size());
    for (int32_t t : rest) seq_->tokens.push_back(t);
    dvr.Settle(*seq_, v, cache_);
  }

  DeterminismPolicy policy_;
  EngineStats stats_;
  KvCache cache_{64, 4};
  std::unique_ptr<Sequence> seq_;
};

TEST_F(DvrControllerTest, AFullWindowOrAnEndingCandidateMakesTheRequestReady) {
  DvrController dvr(policy_, stats_);
  AddCandidates(dvr, std::vector<int32_t>(15, 7));
  EXPECT_FALSE(seq_->ready);
  AddCandidates(dvr, {7});
  EXPECT_TRUE(seq_->ready);
  seq_->DropCandidates();
  dvr.AddCandidate(*seq_, 2, 1.0, /*ends=*/true);
  EXPECT_TRUE(seq_->ready);
}

TEST_F(DvrControllerTest, ACloseDrawIsVerifiedAtOnceUnlessEarlyVerificationIsOff) {
  DvrController dvr(policy_, stats_);
  AddCandidates(dvr, {7}, DvrController::kEarlyVerifyMargin / 2);
  EXPECT_TRUE(seq_->ready);
  policy_.early_verify = false;
  DvrController plain(policy_, stats_);
  seq_->DropCandidates();
  AddCandidates(plain, {7}, 0.0);
  EXPECT_FALSE(seq_->ready);
}

TEST_F(DvrControllerTest, AgreementCommitsEverything) {
  DvrController dvr(policy_, stats_);
  const std::vector<int32_t> c = {7, 8, 9, 10};
  AddCandidates(dvr, c);
  const auto v = dvr.Verify(*seq_, 4, false, 0, Rows(c));
  EXPECT_EQ(v.tokens, c);
  EXPECT_FALSE(v.disagreed);
  EXPECT_EQ(v.discarded, 0);
  Commit(dvr, v);
  EXPECT_EQ(seq_->candidates(), 0);
  EXPECT_EQ(seq_->n_computed, seq_->n_committed - 1);
  EXPECT_FALSE(seq_->ready);
}

// A replay that also fed the last candidate: when every candidate agrees, its last row's token
// is committed after them (the decode under fixed that follows the window), and the cache keeps
// the K/V the replay wrote; when one disagrees, that row is ignored like every row after it.
TEST_F(DvrControllerTest, TheRowAfterAnAgreedWindowCommitsTheNextToken) {
  DvrController dvr(policy_, stats_);
  const std::vector<int32_t> c = {7, 8, 9, 10};
  AddCandidates(dvr, c);
  ASSERT_TRUE(cache_.Reserve(seq_->kv_seq, static_cast<int64_t>(seq_->tokens.size())));
  const auto v = dvr.Verify(*seq_, 5, true, 0, Rows({7, 8, 9, 10, 22}));
  EXPECT_EQ(v.tokens, (std::vector<int32_t>{7, 8, 9, 10, 22}));
  EXPECT_EQ(v.logprobs, (std::vector<float>{0, -1, -2, -3, -4}));  // each row's own
  EXPECT_EQ(v.verified, 4);
  EXPECT_FALSE(v.disagreed);
  Commit(dvr, v);
  EXPECT_EQ(seq_->n_committed, 9);
  EXPECT_EQ(seq_->tokens.back(), 22);
  EXPECT_EQ(seq_->candidates(), 0);
  EXPECT_FALSE(seq_->ready);
  EXPECT_EQ(seq_->n_computed, 8);
  EXPECT_EQ(stats_.Get(Stat::kTokensVerified), 4);
  EXPECT_EQ(stats_.invariant_violations(), 0);
  AddCandidates(dvr, {11, 12});
  ASSERT_TRUE(cache_.Reserve(seq_->kv_seq, static_cast<int64_t>(seq_->tokens.size())));
  const auto w = dvr.Verify(*seq_, 3, false, 0, Rows({11, 30, 31}));
  EXPECT_EQ(w.tokens, (std::vector<int32_t>{11, 30}));
  EXPECT_EQ(w.discarded, 1);
  Commit(dvr, w);
  EXPECT_EQ(seq_->n_committed, 11);
  EXPECT_EQ(seq_->n_computed, 10);
  EXPECT_EQ(stats_.invariant_violations(), 0);
}

// docs/determinism-tests.md item 9 at the controller: the replay's token replaces the first candidate it
// disagrees with, every later candidate goes, and the cache keeps exactly the positions whose
// K/V the replay wrote.
TEST_F(DvrControllerTest, DisagreementRollsBackAndTruncatesTheCache) {
  DvrController dvr(policy_, stats_);
  AddCandidates(dvr, {7, 8, 9, 10, 11, 12});
  const auto v = dvr.Verify(*seq_, 6, true, 0, Rows({7, 8, 20, 21, 22, 23}));
  EXPECT_EQ(v.tokens, (std::vector<int32_t>{7, 8, 20}));
  EXPECT_EQ(v.logprobs.size(), 3u);
  EXPECT_TRUE(v.disagreed);
  EXPECT_EQ(v.discarded, 4);  // 9 (replaced), 10, 11, 12
  Commit(dvr, v);
  EXPECT_EQ(seq_->n_committed, 7);
  EXPECT_EQ(seq_->candidates(), 0);
  EXPECT_EQ(seq_->n_computed, 6);
  EXPECT_EQ(cache_.reserved_positions(seq_->kv_seq), cache_.BlocksFor(6) * cache_.block_size());
  EXPECT_EQ(stats_.Get(Stat::kRollbacks), 1);
  EXPECT_EQ(stats_.Get(Stat::kTokensRolledBack), 4);
  EXPECT_EQ(stats_.Get(Stat::kTokensVerified), 6);
  EXPECT_EQ(stats_.invariant_violations(), 0);
}

TEST_F(DvrControllerTest, APartThatAgreesLeavesTheRestReady) {
  DvrController dvr(policy_, stats_);
  seq_->window = 6;
  AddCandidates(dvr, {7, 8, 9, 10, 11, 12});
  ASSERT_TRUE(seq_->ready);
  const int64_t computed = seq_->n_computed;
  const auto v = dvr.Verify(*seq_, 4, false, 0, Rows({7, 8, 9, 10}));
  Commit(dvr, v);
  EXPECT_EQ(seq_->n_committed, 8);
  EXPECT_EQ(seq_->candidates(), 2);
  EXPECT_TRUE(seq_->ready);
  EXPECT_EQ(seq_->n_computed, computed) << "the unverified candidates' K/V stay for the next part";
  // A disagreement in a part drops the unverified candidates too.
  const auto w = dvr.Verify(*seq_, 1, false, 0, Rows({30}));
  EXPECT_EQ(w.discarded, 2);
  Commit(dvr, w);
  EXPECT_EQ(seq_->candidates(), 0);
  EXPECT_EQ(seq_->tokens.back(), 30);
}

TEST_F(DvrControllerTest, WindowShrinksAfterARollbackAndGrowsBackWhileWindowsPass) {
  DvrController dvr(policy_, stats_);
  AddCandidates(dvr, std::vector<int32_t>(16, 7));
  Commit(dvr, dvr.Verify(*seq_, 16, false, 0, Rows(std::vector<int32_t>(16, 8))));
  EXPECT_EQ(seq_->window, 2);  // 16 / 8
  for (int32_t expected : {4, 8, 16, 16}) {
    AddCandidates(dvr, std::vector<int32_t>(static_cast<size_t>(seq_->window), 7));
    ASSERT_TRUE(seq_->ready);
    Commit(dvr, dvr.Verify(*seq_, seq_->candidates(), false, 0, Rows(std::vector<int32_t>(static_cast<size_t>(seq_->window), 7))));
    EXPECT_EQ(seq_->window, expected);
  }
  policy_.adaptive_window = false;
  DvrController fixed(policy_, stats_);
  AddCandidates(fixed, std::vector<int32_t>(16, 7));
  Commit(fixed, fixed.Verify(*seq_, 16, false, 0, Rows(std::vector<int32_t>(16, 8))));
  EXPECT_EQ(seq_->window, 16);
}

TEST_F(DvrControllerTest, InjectedMismatchesKeepTheAgreedTokens) {
  policy_.mismatch_injection = 1.0;
  DvrController dvr(policy_, stats_);
  const std::vector<int32_t> c = {7, 8, 9, 10, 11};
  AddCandidates(dvr, c);
  const auto v = dvr.Verify(*seq_, 5, false, 0, Rows(c));
  EXPECT_TRUE(v.disagreed);
  ASSERT_FALSE(v.tokens.empty());
  EXPECT_TRUE(std::equal(v.tokens.begin(), v.tokens.end(), c.begin()));
  EXPECT_EQ(v.discarded, 5 - static_cast<int64_t>(v.tokens.size()));
}

}  // namespace
}  // namespace llm42
