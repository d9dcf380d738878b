#ifndef LLM42_TESTS_BACKEND_HARNESS_H_
#define LLM42_TESTS_BACKEND_HARNESS_H_

// Drives any Backend from host data: inputs go into workspace slots, results come back to the
// host, and paged KV is filled through the backend's own StoreKv.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backend/backend.h"
#include "lib/kv/kv_cache.h"
#include "tests/op_reference.h"

namespace llm42::testing {

class BackendHarness {
 public:
  explicit BackendHarness(Backend& be) : be_(be) {}

  Backend& backend() { return be_; }

  // A copy of `host` in backend memory (its own workspace slot, valid for the harness's life).
  float* Put(const std::vector<float>& host) {
    float* d = Alloc(host.size());
    if (d != nullptr) {
      EXPECT_TRUE(be_.CopyFromHost(d, host.data(), host.size()).ok());
    }
    return d;
  }
  // Backend memory for n floats (its own workspace slot).
  float* Alloc(size_t n) {
    auto d = be_.Workspace(next_slot_++, std::max<size_t>(n, 1));
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *d : nullptr;
  }
  std::vector<float> Get(const float* d, size_t n) {
    std::vector<float> host(n);
    const absl::Status s = be_.CopyToHost(host.data(), d, n);
    EXPECT_TRUE(s.ok()) << s;
    return host;
  }

  // y = x * w^T on the backend, back on the host.
  std::vector<float> MatMul(const std::vector<float>& x, int64_t m, const WeightMatrix& w, Schedules s) {
    float* y = Alloc(static_cast<size_t>(m * w.rows));
    const absl::Status st = be_.MatMul(Put(x), m, w, y, s);
    EXPECT_TRUE(st.ok()) << st;
    return Get(y, static_cast<size_t>(m * w.rows));
  }

 private:
  Backend& be_;
  int next_slot_ = 100;  // clear of the slots a model runner uses
};

// Sequences of different lengths in one paged cache (block size 16) of one layer, filled with
// random K/V through the backend's StoreKv; the host keeps the values for references.
class AttentionFixture {
 public:
  static constexpr int64_t kHeads = 4, kKvHeads = 2, kHeadDim = 64, kKvDim = kKvHeads * kHeadDim;

  // The sequences' K/V in storage layer `layer` of layers as wide as `layer_dims` (empty: one
  // layer of kKvDim); the other layers are written after it with other values, so that a layer
  // addressed where another lies shows.
  AttentionFixture(Backend& be, const std::vector<int64_t>& lengths, int64_t layer = 0,
                   const std::vector<int64_t>& layer_dims = {})
      : h_(be), lengths_(lengths), layer_(layer) {
    KvShape shape{1, cache_.n_blocks(), cache_.block_size(), kKvDim};
    if (!layer_dims.empty()) {
      EXPECT_EQ(layer_dims[static_cast<size_t>(layer)], kKvDim);
      shape.n_layers = static_cast<int64_t>(layer_dims.size());
      shape.kv_dim = *std::max_element(layer_dims.begin(), layer_dims.end());
      shape.layer_dims = layer_dims;
    }
    EXPECT_TRUE(be.AllocateKv(shape).ok());
    std::mt19937 rng(9);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    for (int64_t len : lengths) {
      const int32_t s = cache_.Create();
      EXPECT_TRUE(cache_.Reserve(s, len));
      seqs_.push_back(s);
      std::vector<float> k(static_cast<size_t>(len * kKvDim)), v(k.size());
      for (float& f : k) f = dist(rng);
      for (float& f : v) f = dist(rng);
      std::vector<int32_t> positions, tokens(static_cast<size_t>(len), 0);
      for (int32_t p = 0; p < len; ++p) positions.push_back(p);
      std::vector<const int32_t*> tables(static_cast<size_t>(len), cache_.block_table(s));
      EXPECT_TRUE(be.BeginBatch(BatchPlan{tokens, positions, tables, Schedule::kFixed}).ok());
      EXPECT_TRUE(be.StoreKv(layer_, h_.Put(k), h_.Put(v)).ok());
      for (int64_t other = 0; other < shape.n_layers; ++other) {
        if (other == layer_) continue;
        std::vector<float> junk(static_cast<size_t>(len * shape.width(other)), 1e3f + static_cast<float>(other));
        EXPECT_TRUE(be.StoreKv(other, h_.Put(junk), h_.Put(junk)).ok());
      }
      keys_.push_back(std::move(k));
      values_.push_back(std::move(v));
    }
    RoundToStoredType(be.kv_dtype());
  }

  // Attention for (sequence index, position) rows in one batch; q holds kHeads * kHeadDim per
  // sequence index.
  std::vector<float> Run(const std::vector<std::pair<int, int32_t>>& rows, const std::vector<float>& q,
                         Schedule s) {
    std::vector<int32_t> positions, tokens(rows.size(), 0);
    std::vector<const int32_t*> tables;
    std::vector<float> qs;
    for (const auto& [seq, pos] : rows) {
      positions.push_back(pos);
      tables.push_back(cache_.block_table(seqs_[static_cast<size_t>(seq)]));
      qs.insert(qs.end(), q.begin() + seq * kHeads * kHeadDim, q.begin() + (seq + 1) * kHeads * kHeadDim);
    }
    Backend& be = h_.backend();
    EXPECT_TRUE(be.BeginBatch(BatchPlan{tokens, positions, tables, s}).ok());
    float* out = h_.Alloc(qs.size());
    AttentionShape shape{kHeads, kKvHeads, kHeadDim};
    if (!sinks_.empty()) shape.sinks = h_.Put(sinks_);
    last_status_ = be.Attention(layer_, h_.Put(qs), shape, out, s);
    EXPECT_TRUE(last_status_.ok() || expect_refusal_) << last_status_;
    return h_.Get(out, qs.size());
  }
  // What the last Run's Attention returned; with expect_refusal, a failure there is the caller's
  // to check.
  const absl::Status& last_status() const { return last_status_; }
  void expect_refusal(bool on) { expect_refusal_ = on; }

  // A sink logit per head (kHeads) for the runs and references that follow (AttentionShape::sinks).
  void set_sinks(std::vector<float> sinks) { sinks_ = std::move(sinks); }

  // The float64 reference for head h of a query over positions [0, len) of sequence `seq`.
  std::vector<double> Reference(int seq, int64_t len, int64_t h, const float* q) const {
    const std::vector<float>& k = keys_[static_cast<size_t>(seq)];
    const std::vector<float>& v = values_[static_cast<size_t>(seq)];
    const int64_t off = (h / (kHeads / kKvHeads)) * kHeadDim;
    return ReferenceAttention(
        q, len, kHeadDim, [&](int64_t t) { return k.data() + t * kKvDim + off; },
        [&](int64_t t) { return v.data() + t * kKvDim + off; }, sinks_.empty() ? nullptr : &sinks_[static_cast<size_t>(h)]);
  }

  // Every head of every row of `out` (what Run gave for `rows` and `q`) against Reference, to
  // within `tolerance`; `what` names the run in a failure.
  void ExpectMatchesReference(const std::vector<std::pair<int, int32_t>>& rows, const std::vector<float>& q,
                              const std::vector<float>& out, double tolerance, const std::string& what) const {
    for (size_t r = 0; r < rows.size(); ++r) {
      const auto [seq, pos] = rows[r];
      for (int64_t h = 0; h < kHeads; ++h) {
        const std::vector<double> ref = Reference(seq, pos + 1, h, q.data() + (seq * kHeads + h) * kHeadDim);
        for (int64_t i = 0; i < kHeadDim; ++i) {
          ASSERT_NEAR(out[r * kHeads * kHeadDim + static_cast<size_t>(h * kHeadDim + i)], ref[static_cast<size_t>(i)],
                      tolerance)
              << what << ": row " << r << " (sequence " << seq << ", position " << pos << ") head " << h;
        }
      }
    }
  }

  const std::vector<int64_t>& lengths() const { return lengths_; }

 private:
  // The host copies as the backend stored them: rounded to its KV type (f16 or bf16, to
  // nearest), so that Reference is exact about storage and its tolerance is about arithmetic.
  void RoundToStoredType(KvDtype dtype) {
    if (dtype == KvDtype::kF32) return;
    for (auto* set : {&keys_, &values_}) {
      for (std::vector<float>& rows : *set) {
        for (float& x : rows) x = dtype == KvDtype::kF16 ? Fp16ToFp32(Fp32ToFp16(x)) : Bf16ToFp32(Fp32ToBf16(x));
      }
    }
  }

  BackendHarness h_;
  KvCache cache_{256, 16};
  std::vector<int64_t> lengths_;
  int64_t layer_ = 0;
  std::vector<int32_t> seqs_;
  std::vector<std::vector<float>> keys_, values_;
  std::vector<float> sinks_;
  absl::Status last_status_;
  bool expect_refusal_ = false;
};

}  // namespace llm42::testing

#endif  // LLM42_TESTS_BACKEND_HARNESS_H_
