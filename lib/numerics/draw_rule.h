#ifndef LLM42_NUMERICS_DRAW_RULE_H_
#define LLM42_NUMERICS_DRAW_RULE_H_

// The rule that turns a row of logits into a sampled token and into logprobs, written once for
// the host and a CUDA device (host_device.h), so that a device sampling where its logits are
// gives bitwise the host's choice and logprobs.
//
// Every sum the rule makes is exact: a token's weight is e^((logit - max) / T) in fixed point,
// kWeightBits fraction bits (weights below 2^-40 of the best's are 0: such a token is never
// drawn), summed as 64-bit integers. A sum of integers is the same in any order, so the host's
// walk in draw order and a device's parallel reductions agree to the bit; a sum of doubles would
// depend on the order of its additions. The thresholds (top-p, min-p, the draw's target) are
// compared in exact integer arithmetic too.
//
// The rule (lib/sampling/sampler.h states it for users):
//   order: logits descending, ties by lower id (OrderKey); max = the first token's logit;
//   top-k (0 < k < n): the first k; total = their weights' sum;
//   top-p (< 1): the shortest prefix whose weights reach TopPNeed(top_p, total);
//   min-p (> 0): of those, the prefix before the first token whose weight is below MinPNeed(min_p)
//   (the first token always reaches it);
//   kept_total = the kept weights' sum; target = DrawTarget(PhiloxBits53(seed, position), kept_total);
//   the token: the first kept one whose cumulative weight exceeds target. A kept_total of 0 (the
//   first logit is +inf or NaN) draws the first token.
//   logprobs: logit - max - log(sum over all tokens of the temperature-1 weights * 2^-40).
//
// DrawBySelect computes the rule without sorting, as a device would (radix selection over the
// order keys with exact sums), over a Group of cooperating threads; the host sampler
// (lib/sampling/sampler.cc) walks a lazily sorted order instead. sampling_test holds the two
// equal.

#include <cstdint>

#include "lib/numerics/host_device.h"
#include "lib/numerics/philox.h"
#include "lib/numerics/portable_exp_log.h"

namespace llm42 {

struct SamplingParams {
  float temperature = 0.0f;  // 0 = greedy
  int32_t top_k = 0;         // 0 = off
  float top_p = 1.0f;        // 1 = off
  float min_p = 0.0f;        // 0 = off
  uint64_t seed = 0;
};

// Whether draws under `p` are greedy (temperature 0, or top-k 1): the argmax (argmax.h).
LLM42_HD inline bool IsGreedy(const SamplingParams& p) { return p.temperature <= 0.0f || p.top_k == 1; }

inline constexpr int kWeightBits = 40;
inline constexpr double kWeightScale = 1099511627776.0;  // 2^kWeightBits

// A weight e (e^x for x <= 0, so in [0, 1]) in fixed point: floor(e * 2^40); NaN gives 0.
LLM42_HD inline uint64_t FixedWeight(double e) {
  const double s = e * kWeightScale;  // exact: a power of two
  return s >= 1.0 ? static_cast<uint64_t>(s) : 0;
}

// The weight of a logit at temperature t (> 0) against the row's max.
LLM42_HD inline uint64_t DrawWeight(float logit, double max, double t) {
  return FixedWeight(PortableExp((static_cast<double>(logit) - max) / t));
}

// Unsigned keys ascending in the draw order: logits descending, -0 and +0 one value (they compare
// equal, so their order is the ids'), the id below. Unique per token.
LLM42_HD inline uint32_t DescendingKey(float logit) {
  uint32_t u = BitsOfFloat(logit);
  u = u == 0x80000000u ? 0 : u;
  // Negative: all bits flipped; otherwise the sign bit set. Then flipped for descending.
  const uint32_t ascending = u ^ (static_cast<uint32_t>(static_cast<int32_t>(u) >> 31) | 0x80000000u);
  return ~ascending;
}
LLM42_HD inline uint64_t OrderKey(float logit, int64_t id) {
  return uint64_t{DescendingKey(logit)} << 32 | static_cast<uint32_t>(id);
}
LLM42_HD inline int32_t KeyId(uint64_t key) { return static_cast<int32_t>(key & 0xffffffffu); }

// The smallest integer at or above top_p * total, exactly (top_p in (0, 1)).
LLM42_HD inline uint64_t TopPNeed(float top_p, uint64_t total) {
  const uint32_t bits = BitsOfFloat(top_p);
  const int exponent = static_cast<int>((bits >> 23) & 0xff);
  // top_p = mantissa * 2^-shift
  const uint64_t mantissa = exponent == 0 ? (bits & 0x7fffff) : ((bits & 0x7fffff) | 0x800000);
  const int shift = exponent == 0 ? 149 : 150 - exponent;
  const unsigned __int128 product = static_cast<unsigned __int128>(mantissa) * total;
  if (shift >= 128) return product != 0 ? 1 : 0;
  const unsigned __int128 one = static_cast<unsigned __int128>(1) << shift;
  return static_cast<uint64_t>((product + one - 1) >> shift);
}

// The smallest weight min-p keeps: ceil(min_p * 2^40) (min_p in (0, 1]).
LLM42_HD inline uint64_t MinPNeed(float min_p) {
  const double scaled = static_cast<double>(min_p) * kWeightScale;  // exact
  auto need = static_cast<uint64_t>(scaled);
  if (static_cast<double>(need) < scaled) ++need;
  return need;
}

// floor(u53 * 2^-53 * total): the draw's target in [0, total).
LLM42_HD inline uint64_t DrawTarget(uint64_t u53, uint64_t total) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(u53) * total) >> 53);
}

// The margins (SampledToken::margin in sampler.h): how close a decision came to going the other
// way. Heuristics for when to verify early; they decide no token.
LLM42_HD inline double MinOf(double a, double b) { return b < a ? b : a; }
// Relative gap between two logits, the first the larger.
LLM42_HD inline double LogitGap(float a, float b) {
  const double da = a, abs_a = da < 0 ? -da : da;
  return (da - b) / (abs_a > 1.0 ? abs_a : 1.0);
}
// Top-p's cut: the kept prefix's weights `cum`, those before its last token `before`.
LLM42_HD inline double TopPMargin(uint64_t before, uint64_t cum, uint64_t total, float top_p) {
  const double t = static_cast<double>(total);
  return MinOf(static_cast<double>(cum) / t - top_p, top_p - static_cast<double>(before) / t);
}
// Min-p's cut: the last kept weight and the first dropped one, against min_p.
LLM42_HD inline double MinPMargin(uint64_t last_kept, uint64_t first_dropped, float min_p) {
  return MinOf(static_cast<double>(last_kept) / kWeightScale - min_p,
               min_p - static_cast<double>(first_dropped) / kWeightScale);
}
// The draw: the drawn token's cumulative weight `cum`, the weight before it `before`.
LLM42_HD inline double DrawMargin(uint64_t target, uint64_t before, uint64_t cum, uint64_t kept_total) {
  return MinOf(static_cast<double>(target - before), static_cast<double>(cum - target)) /
         static_cast<double>(kept_total);
}

// log(sum of the row's temperature-1 weights, times 2^-40): the logprobs' normalizer.
LLM42_HD inline double LogTotal(uint64_t total) { return PortableLog(static_cast<double>(total) / kWeightScale); }
LLM42_HD inline float Logprob(float logit, double max, double log_total) {
  return static_cast<float>(logit - max - log_total);
}

// A draw, and how close it came to being another token: the smallest gap, over the decisions
// that picked it, between the value compared and its threshold. Greedy and top-k: the logit gap
// at the cut, divided by max(1, |logit|); the draw and top-p: in units of probability (weight
// over the total); min-p: weight ratio against min_p. A draw whose margin is well above the
// logits' rounding noise cannot change when they are recomputed another way.
struct SampledToken {
  int32_t token;
  double margin;
};

// ---- The rule by radix selection, for a group of threads sharing memory ----------------------
//
// A Group gives: int rank() and size(); void Sync() (a barrier); uint64_t* Bins() (256 shared
// counters); uint64_t* Shared() (4 shared words); and atomic Add, Min and Max on shared words.
// Every thread of the group calls these functions with the same arguments.

namespace draw_internal {

LLM42_HD inline double Temperature(const SamplingParams& p) { return p.temperature > 0 ? p.temperature : 1.0; }

inline constexpr uint64_t kNoKey = ~uint64_t{0};

// Which tokens MinKey looks at: all, those after a key, or those up to `cut` that min-p drops.
struct AnyKey {
  LLM42_HD bool operator()(const float*, int64_t, uint64_t) const { return true; }
};
struct KeyAfter {
  uint64_t after;
  LLM42_HD bool operator()(const float*, int64_t, uint64_t key) const { return key > after; }
};
struct DroppedByMinP {
  double max, t;
  uint64_t cut, min_w;
  LLM42_HD bool operator()(const float* logits, int64_t i, uint64_t key) const {
    return key <= cut && DrawWeight(logits[i], max, t) < min_w;
  }
};

// The smallest key among the tokens `looked_at` takes; kNoKey when it takes none.
template <class Group, class Pred>
LLM42_HD uint64_t MinKey(Group& g, const float* logits, int64_t n, const Pred& looked_at) {
  uint64_t* sh = g.Shared();
  if (g.rank() == 0) sh[0] = kNoKey;
  g.Sync();
  for (int64_t i = g.rank(); i < n; i += g.size()) {
    const uint64_t key = OrderKey(logits[i], i);
    if (looked_at(logits, i, key)) g.Min(&sh[0], key);
  }
  g.Sync();
  const uint64_t key = sh[0];
  g.Sync();
  return key;
}

// Over the tokens with key <= cut: their weights' sum and the smallest weight.
struct Tally {
  uint64_t sum, min_weight;
};
template <class Group>
LLM42_HD Tally TallyKept(Group& g, const float* logits, int64_t n, double max, double t, uint64_t cut) {
  uint64_t* sh = g.Shared();
  if (g.rank() == 0) {
    sh[0] = 0;
    sh[1] = ~uint64_t{0};
  }
  g.Sync();
  uint64_t sum = 0, low = ~uint64_t{0};
  for (int64_t i = g.rank(); i < n; i += g.size()) {
    if (OrderKey(logits[i], i) > cut) continue;
    const uint64_t w = DrawWeight(logits[i], max, t);
    sum += w;
    low = w < low ? w : low;
  }
  g.Add(&sh[0], sum);
  g.Min(&sh[1], low);
  g.Sync();
  const Tally tally{sh[0], sh[1]};
  g.Sync();
  return tally;
}

// The smallest key K such that the tokens with key <= K (and key <= cut) reach
// `need` (their weights' sum, or their count when !by_weight); `before`: what the tokens before
// K add up to. Eight passes, one per byte of the key from the top, each a histogram of what the
// tokens under the prefix found so far add in each byte value. `need` must be reachable.
struct Selected {
  uint64_t key, before;
};
template <class Group>
LLM42_HD Selected Select(Group& g, const float* logits, int64_t n, double max, double t, uint64_t cut,
                         bool by_weight, uint64_t need) {
  uint64_t* bins = g.Bins();
  uint64_t* sh = g.Shared();
  uint64_t prefix = 0, below = 0;
  for (int level = 0; level < 8; ++level) {
    const int shift = 56 - 8 * level;
    for (int b = g.rank(); b < 256; b += g.size()) bins[b] = 0;
    g.Sync();
    for (int64_t i = g.rank(); i < n; i += g.size()) {
      const uint64_t key = OrderKey(logits[i], i);
      if (key > cut || (level > 0 && (key >> (shift + 8)) != (prefix >> (shift + 8)))) continue;
      const uint64_t v = by_weight ? DrawWeight(logits[i], max, t) : 1;
      if (v != 0) g.Add(&bins[(key >> shift) & 0xff], v);
    }
    g.Sync();
    if (g.rank() == 0) {
      uint64_t acc = below;
      int d = 0;
      while (d < 255 && acc + bins[d] < need) acc += bins[d++];
      sh[0] = static_cast<uint64_t>(d);
      sh[1] = acc;
    }
    g.Sync();
    prefix |= sh[0] << shift;
    below = sh[1];
    g.Sync();
  }
  return {prefix, below};
}

}  // namespace draw_internal

// The rule's draw for a non-greedy `p` (IsGreedy false) at `position`, by selection.
template <class Group>
LLM42_HD SampledToken DrawBySelect(Group& g, const float* logits, int64_t n, const SamplingParams& p, uint64_t position) {
  using namespace draw_internal;
  const uint64_t first = MinKey(g, logits, n, AnyKey{});
  const double max = logits[KeyId(first)];
  const double t = Temperature(p);
  double margin = DoubleOfBits(internal::kInfBits);
  uint64_t cut = kNoKey;
  if (p.top_k > 0 && p.top_k < n) {
    cut = Select(g, logits, n, max, t, kNoKey, false, static_cast<uint64_t>(p.top_k)).key;
    const uint64_t next = MinKey(g, logits, n, KeyAfter{cut});
    margin = LogitGap(logits[KeyId(cut)], logits[KeyId(next)]);
  }
  if (p.top_p < 1.0f) {
    const uint64_t total = TallyKept(g, logits, n, max, t, cut).sum;
    if (total > 0) {
      const Selected s = Select(g, logits, n, max, t, cut, true, TopPNeed(p.top_p, total));
      margin = MinOf(margin, TopPMargin(s.before, s.before + DrawWeight(logits[KeyId(s.key)], max, t), total, p.top_p));
      cut = s.key;
    }
  }
  Tally kept = TallyKept(g, logits, n, max, t, cut);
  if (p.min_p > 0.0f) {
    const uint64_t drop = MinKey(g, logits, n, DroppedByMinP{max, t, cut, MinPNeed(p.min_p)});
    if (drop != kNoKey && drop != first) {  // the kept prefix ends before it
      cut = drop - 1;
      kept = TallyKept(g, logits, n, max, t, cut);
      margin = MinOf(margin, MinPMargin(kept.min_weight, DrawWeight(logits[KeyId(drop)], max, t), p.min_p));
    }
  }
  if (kept.sum == 0) return {KeyId(first), 0.0};
  const uint64_t target = DrawTarget(PhiloxBits53(p.seed, position), kept.sum);
  const Selected s = Select(g, logits, n, max, t, cut, true, target + 1);
  const uint64_t cum = s.before + DrawWeight(logits[KeyId(s.key)], max, t);
  return {KeyId(s.key), MinOf(margin, DrawMargin(target, s.before, cum, kept.sum))};
}

// The row's logprob normalizer: max (the first token's logit) and LogTotal.
struct LogSoftmaxParts {
  double max, log_total;
};
template <class Group>
LLM42_HD LogSoftmaxParts LogSoftmaxBySelect(Group& g, const float* logits, int64_t n) {
  using namespace draw_internal;
  const double max = logits[KeyId(MinKey(g, logits, n, AnyKey{}))];
  const uint64_t total = TallyKept(g, logits, n, max, 1.0, kNoKey).sum;
  return {max, LogTotal(total)};
}

// A row to draw from where its logits are (Backend::DrawRows), and what comes back: the draw, its
// logprob at temperature 1, and the row's top_n most likely tokens with theirs.
inline constexpr int kMaxTopLogprobs = 20;
struct RowDraw {
  int32_t row = 0;
  int32_t top_n = 0;
  uint64_t position = 0;
  SamplingParams params;
};
struct DrawnRow {
  SampledToken draw;
  float logprob;
  int32_t top_n;
  int32_t top_ids[kMaxTopLogprobs];
  float top_logprobs[kMaxTopLogprobs];
};

// A row's draw (non-greedy p), logprob and top_n (at most kMaxTopLogprobs) into *out, written by
// the group's rank 0.
template <class Group>
LLM42_HD void DrawRow(Group& g, const float* logits, int64_t n, const SamplingParams& p, uint64_t position,
                      int32_t top_n, DrawnRow* out) {
  const SampledToken draw = DrawBySelect(g, logits, n, p, position);
  const LogSoftmaxParts lp = LogSoftmaxBySelect(g, logits, n);
  if (g.rank() == 0) {
    out->draw = draw;
    out->logprob = Logprob(logits[draw.token], lp.max, lp.log_total);
    out->top_n = top_n < n ? top_n : static_cast<int32_t>(n);
  }
  uint64_t key = 0;
  for (int32_t i = 0; i < top_n && i < n; ++i) {
    key = i == 0 ? draw_internal::MinKey(g, logits, n, draw_internal::AnyKey{})
                 : draw_internal::MinKey(g, logits, n, draw_internal::KeyAfter{key});
    if (g.rank() == 0) {
      out->top_ids[i] = KeyId(key);
      out->top_logprobs[i] = Logprob(logits[KeyId(key)], lp.max, lp.log_total);
    }
  }
}

// A group of one thread: the rule run serially on the host (tests), or by one device thread.
class SerialGroup {
 public:
  LLM42_HD int rank() const { return 0; }
  LLM42_HD int size() const { return 1; }
  LLM42_HD void Sync() {}
  LLM42_HD uint64_t* Bins() { return bins_; }
  LLM42_HD uint64_t* Shared() { return shared_; }
  LLM42_HD void Add(uint64_t* p, uint64_t v) { *p += v; }
  LLM42_HD void Min(uint64_t* p, uint64_t v) { *p = v < *p ? v : *p; }
  LLM42_HD void Max(uint64_t* p, uint64_t v) { *p = v > *p ? v : *p; }

 private:
  uint64_t bins_[256] = {};
  uint64_t shared_[4] = {};
};

}  // namespace llm42

#endif  // LLM42_NUMERICS_DRAW_RULE_H_
