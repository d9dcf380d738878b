#ifndef LLM42_TESTS_FAKE_MODEL_H_
#define LLM42_TESTS_FAKE_MODEL_H_

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/engine/engine.h"
#include "lib/engine/sequence.h"
#include "lib/kv/kv_cache.h"
#include "lib/numerics/argmax.h"
#include "lib/numerics/draw_rule.h"
#include "lib/numerics/logit_edit.h"
#include "lib/tokenizer/tokenizer.h"

namespace llm42::testing {

// A stand-in for ModelWeights::Forward that makes the engine's bookkeeping observable: each row
// writes (token, schedule) as its K/V, and its logits depend on every K/V of its prefix, so a
// stale or missing position changes the next token. Fast rows at some positions pick another
// token than fixed rows would (real divergence, for rollbacks), and optionally the end of
// sequence comes where the prefix hash says so. Greedy sampling throughout.
class FakeModel {
 public:
  static constexpr int32_t kVocab = 32;

  // A fast row flips its token where the prefix hash is divisible by flip_every (0: never); the
  // next token is EOS (2) where it is divisible by eos_every (0: never), before a fast row's flip.
  explicit FakeModel(int64_t kv_blocks = 256, int64_t flip_every = 5, int64_t eos_every = 0)
      : cache_(kv_blocks, kBlockSize),
        kv_(static_cast<size_t>(kv_blocks * kBlockSize * 2)),
        flip_every_(flip_every),
        eos_every_(eos_every) {
    VocabSpec spec;
    spec.model = "llama";
    for (int32_t i = 0; i < kVocab; ++i) spec.texts.push_back("t" + std::to_string(i) + " ");
    spec.bos = 1;
    spec.eos = 2;
    tokenizer_ = std::move(Tokenizer::FromVocab(std::move(Vocab::FromSpec(std::move(spec)).value())).value());
  }

  const Tokenizer& tokenizer() const { return *tokenizer_; }
  KvCache& cache() { return cache_; }
  // Fixed rows of a sequence that started under fixed (a deterministic request's) that attended
  // over a position whose K/V a fast row wrote: the verify pass and the rollback must never let
  // that happen (docs/deterministic-requests.md, invariant 4).
  int64_t fixed_rows_reading_fast_kv() const { return fixed_reads_fast_; }
  int64_t forward_calls() const { return calls_; }
  // Logit rows brought back as an argmax summary only (ForwardBatch::argmax_only), and drawn
  // where the logits are (ForwardBatch::device_draw, by the rule's one-thread group).
  int64_t summarized_rows() const { return summarized_; }
  int64_t device_drawn_rows() const { return device_drawn_; }
  // Logit rows whose controls were applied where the logits are (ForwardBatch::controls).
  int64_t controlled_rows() const { return controlled_; }

  Engine::ForwardFn Forward() {
    return [this](const ForwardBatch& b) -> absl::StatusOr<float*> {
      Run(b);
      return logits_.data();
    };
  }

  std::unique_ptr<Engine> MakeEngine(const EngineConfig& config, EngineStats& stats) {
    return std::make_unique<Engine>(config, *tokenizer_, cache_, Forward(), stats);
  }

  static std::unique_ptr<Sequence> MakeSequence(std::vector<int32_t> prompt, int32_t max_tokens,
                                                bool dvr, uint64_t arrival, int32_t window,
                                                TokenCallbackFn callback = nullptr,
                                                void* user = nullptr) {
    RequestOptions o;
    o.prompt_tokens = std::move(prompt);
    o.has_prompt_tokens = true;
    o.max_tokens = max_tokens;
    o.ignore_eos = true;
    o.callback = callback;
    o.callback_user_data = user;
    return MakeSequence(std::move(o), dvr, arrival, window);
  }
  // A request of these options (prompt_tokens set), deterministic when dvr.
  static std::unique_ptr<Sequence> MakeSequence(RequestOptions o, bool dvr, uint64_t arrival, int32_t window,
                                                SamplingParams sampling = {}) {
    o.deterministic = dvr;
    std::vector<int32_t> prompt = o.prompt_tokens;
    auto r = std::make_shared<Request>(o, std::move(prompt), 42);
    return std::make_unique<Sequence>(r, arrival, sampling, dvr, window);
  }

 private:
  void Run(const ForwardBatch& b) {
    logits_.assign(b.logit_rows.size() * kVocab, 0.0f);
    float* logits = logits_.data();
    ++calls_;
    // Its own KV storage: (token, fixed?) per position, laid out by the cache's block tables.
    auto key = [&](const int32_t* table, int32_t p) {
      return kv_.data() + (static_cast<size_t>(table[p / kBlockSize]) * kBlockSize + static_cast<size_t>(p % kBlockSize)) * 2;
    };
    auto schedule = [&](size_t i) { return b.schedules.empty() ? b.schedule : b.schedules[i]; };
    for (size_t i = 0; i < b.tokens.size(); ++i) {  // K/V first, as the model does
      float* k = key(cache_.block_table(b.seqs[i]), b.positions[i]);
      k[0] = static_cast<float>(b.tokens[i]);
      k[1] = schedule(i) == Schedule::kFixed ? 1.0f : 0.0f;
    }
    std::vector<float> row(kVocab);
    size_t packed = 0;  // ForwardBatch's contract: summarized rows' summaries, the others' logits packed
    for (size_t r = 0; r < b.logit_rows.size(); ++r) {
      const auto i = static_cast<size_t>(b.logit_rows[r]);
      const int32_t* table = cache_.block_table(b.seqs[i]);
      const int32_t p = b.positions[i];
      int64_t h = 7;
      // A deterministic request's sequence starts under fixed (its prefill, or fixed blocks from
      // the prefix cache); a plain request's decode rows may run under fixed over its own fast
      // prefix (DvrController::DecodeChoice::kAllFixed), which is no violation.
      const bool fixed_sequence = key(table, 0)[1] == 1.0f;
      for (int32_t q = 0; q <= p; ++q) {
        const float* k = key(table, q);
        h = (h * 31 + static_cast<int64_t>(k[0]) * (q + 1)) % 1000003;
        if (schedule(i) == Schedule::kFixed && fixed_sequence && k[1] != 1.0f) ++fixed_reads_fast_;
      }
      int32_t next = 3 + static_cast<int32_t>(h % (kVocab - 3));
      if (eos_every_ > 0 && h % eos_every_ == 0) next = 2;
      if (schedule(i) == Schedule::kFast && flip_every_ > 0 && h % flip_every_ == 0) next = 3 + (next - 3 + 1) % (kVocab - 3);
      for (int32_t v = 0; v < kVocab; ++v) row[static_cast<size_t>(v)] = v == next ? 1.0f : 0.0f;
      for (const Backend::RowControl& c : b.controls) {  // as Backend::ControlRows does, before the draw
        if (c.row != static_cast<int32_t>(r)) continue;
        ApplyEdits(c.edits.data(), static_cast<int64_t>(c.edits.size()), c.rule, row.data());
        if (!c.allowed.empty()) ApplyAllowed(c.allowed.data(), kVocab, row.data());
        ++controlled_;
      }
      if (!b.argmax_only.empty() && b.argmax_only[r]) {
        b.argmax[r] = SummarizeArgmax(row);
        ++summarized_;
      } else if (!b.device_draw.empty() && b.device_draw[r]) {
        SerialGroup g;
        const RowDraw& d = b.draws[r];
        DrawRow(g, row.data(), kVocab, d.params, d.position, d.top_n, &b.drawn[r]);
        ++device_drawn_;
      } else {
        std::copy(row.begin(), row.end(), logits + packed++ * kVocab);
      }
    }
  }

  static constexpr int32_t kBlockSize = 4;

  std::unique_ptr<Tokenizer> tokenizer_;
  KvCache cache_;
  std::vector<float> kv_, logits_;
  int64_t flip_every_, eos_every_;
  int64_t fixed_reads_fast_ = 0, calls_ = 0, summarized_ = 0, device_drawn_ = 0, controlled_ = 0;
};

}  // namespace llm42::testing

#endif  // LLM42_TESTS_FAKE_MODEL_H_
