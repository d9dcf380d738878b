#include "lib/backend/cpu/attention.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "lib/backend/cpu/fixed_tree.h"
#include "lib/backend/cpu/row_dot.h"
#include "lib/backend/cpu/simd_targets.h"
#include "lib/backend/cpu/weight_loaders.h"
#include "lib/numerics/portable_math.h"
#include "lib/util/thread_scratch.h"


namespace llm42::internal {
namespace {

// The stored rows of positions [p, end) in order: KvLayerView::key's block-table lookup and
// division once per KV block, a row's step within it (a profile of decode attention showed the
// per-position division in every loop; alone it measured within noise).
class KvRows {
 public:
  KvRows(const KvLayerView& kv, const int32_t* table, int64_t p, int64_t end)
      : kv_(kv), table_(table), p_(p), end_(end), row_bytes_(kv.kv_dim * kv.elem), v_bytes_(kv.v_offset * kv.elem) {
    if (p < end) Locate();
  }
  bool valid() const { return p_ < end_; }
  const uint8_t* key(int64_t off) const { return row_ + off; }
  const uint8_t* value(int64_t off) const { return row_ + v_bytes_ + off; }
  // Inlined into the kernels' loops, block-table lookup and all: a call here, even one per KV
  // block, made the compiler keep every accumulator in memory across the loop (all vector
  // registers are the caller's to save).
  __attribute__((always_inline)) void Next() {
    ++p_;
    row_ += row_bytes_;
    if (p_ >= block_end_ && p_ < end_) [[unlikely]] Locate();  // the table ends with the last position's block
  }

 private:
  __attribute__((always_inline)) void Locate() {
    row_ = kv_.key(table_, p_);
    block_end_ = (p_ / kv_.block_size + 1) * kv_.block_size;
  }

  const KvLayerView& kv_;
  const int32_t* table_;
  int64_t p_, end_, block_end_ = 0;
  const uint8_t* row_ = nullptr;
  int64_t row_bytes_, v_bytes_;
};

template <typename L>
Partial AttendRangePortable(const float* q, const KvLayerView& kv, const int32_t* table, int64_t off, int64_t hd,
                            float scale, int64_t begin, int64_t end, float* scores, float* o) {
  Partial p;
  KvRows rows(kv, table, begin, end);
  for (int64_t t = begin; t < end; ++t, rows.Next()) {
    const uint8_t* k = rows.key(off);
    float acc[8] = {};
    int64_t i = 0;
    for (; i + 8 <= hd; i += 8) {
      for (int l = 0; l < 8; ++l) acc[l] += q[i + l] * L::At(k, i + l);
    }
    float s = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
    for (; i < hd; ++i) s += q[i] * L::At(k, i);
    scores[t - begin] = kv.softcap != 0 ? PortableSoftCap(s * scale, kv.softcap) : s * scale;
    p.max = std::max(p.max, scores[t - begin]);
  }
  std::fill(o, o + hd, 0.0f);
  KvRows values(kv, table, begin, end);
  for (int64_t t = begin; t < end; ++t, values.Next()) {
    const float e = PortableExpf(scores[t - begin] - p.max);
    p.sum += e;
    const uint8_t* v = values.value(off);
    for (int64_t d = 0; d < hd; ++d) o[d] += e * L::At(v, d);
  }
  return p;
}

// The largest of scores[0, n) (-inf for none; NaNs skipped, as std::max(running, s) skips
// them): eight running maxima, score t in lane t mod 8, then the lanes in order — code the
// compiler turns into vector max instructions, where one running maximum was a chain of scalar
// compares (8-10 % of a prompt's attention on a Zen 5). The value is the one running maximum's
// (AttendRangePortable's) except for the sign of a zero maximum where both +0 and -0 occur, which
// nothing sees: score - max and max - max' are then the same nonzero value or a zero, and
// PortableExpf of +0 and -0 is 1 (portable_math_test).
float MaxScore(const float* s, int64_t n) {
  float lane[8];
  std::fill(lane, lane + 8, -INFINITY);
  int64_t t = 0;
  for (; t + 8 <= n; t += 8) {
    for (int l = 0; l < 8; ++l) lane[l] = s[t + l] > lane[l] ? s[t + l] : lane[l];
  }
  for (; t < n; ++t) lane[t % 8] = s[t] > lane[t % 8] ? s[t] : lane[t % 8];
  float m = -INFINITY;
  for (float v : lane) m = std::max(m, v);
  return m;
}

// Scores soft-capped in place (KvLayerView::softcap; nothing for 0).
void SoftCapScores(float* scores, int64_t n, float softcap) {
  if (softcap == 0) return;
  for (int64_t t = 0; t < n; ++t) scores[t] = PortableSoftCap(scores[t], softcap);
}

// Softmax over scores[0, n) (soft-capped first where softcap is set): the state, with scores
// replaced by their exponentials.
Partial Exponentiate(float* scores, int64_t n, float softcap) {
  SoftCapScores(scores, n, softcap);
  Partial p;
  p.max = MaxScore(scores, n);
  p.sum = PortableExpfShiftedSum(scores, p.max, scores, n);  // PortableExpf's bits; summed in order
  return p;
}

// sums[l] = e[l][0] + e[l][1] + ... + e[l][n[l] - 1], from 0 in index order, for K rows at once:
// K independent chains side by side over the positions all of them have, then each row's rest.
template <int K>
void SumsInOrder(float* const* e, const int64_t* n, Partial* parts) {
  int64_t common = n[0];
  for (int l = 1; l < K; ++l) common = std::min(common, n[l]);
  float s[K] = {};
  for (int64_t t = 0; t < common; ++t) {
#pragma GCC unroll 8
    for (int l = 0; l < K; ++l) s[l] += e[l][t];
  }
  for (int l = 0; l < K; ++l) {
    for (int64_t t = common; t < n[l]; ++t) s[l] += e[l][t];
    parts[l].sum = s[l];
  }
}

// Exponentiate for `count` rows of scores (rows of n[j] scores): the same states and
// exponentials, the sums computed eight rows side by side. One row's in-order sum is a chain of
// dependent additions, which held the exponentials to 0.88 ns a value where they take 0.53
// alone (a Zen 5, AVX-512).
void ExponentiateAll(float* const* scores, const int64_t* n, int count, Partial* parts, float softcap) {
  for (int j = 0; j < count; ++j) {
    SoftCapScores(scores[j], n[j], softcap);
    parts[j].max = MaxScore(scores[j], n[j]);
    PortableExpfShifted(scores[j], parts[j].max, scores[j], n[j]);  // PortableExpf's bits
  }
  int j = 0;
  for (; j + 8 <= count; j += 8) SumsInOrder<8>(scores + j, n + j, parts + j);
  for (; j + 4 <= count; j += 4) SumsInOrder<4>(scores + j, n + j, parts + j);
  for (; j < count; ++j) SumsInOrder<1>(scores + j, n + j, parts + j);
}

#if defined(__x86_64__)
// q . k on 256-bit vectors with the arithmetic above (no scale).
template <typename V, typename L>
LLM42_AVX2 float ScoreOne(const float* q, const uint8_t* k, int64_t hd) {
  const int64_t full = hd / 8 * 8;
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < full; i += 8) acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(q + i), V::Load8(k, i)));
  float s = FixedTreeSum(acc);
  for (int64_t i = full; i < hd; ++i) s += q[i] * L::At(k, i);
  return s;
}

// The 8-lane accumulators of q . k[j] (each key kb bytes into k[j]) over elements [0, full) for N
// keys at once: a product then a sum per 8-element step, the query's register shared by the keys
// (independent chains).
template <int N, typename V>
LLM42_AVX2 inline void KeyDots(const float* q, const uint8_t* const* k, int64_t kb, int64_t full, __m256 (&acc)[N]) {
#pragma GCC unroll 8
  for (int j = 0; j < N; ++j) acc[j] = _mm256_setzero_ps();
  for (int64_t i = 0; i < full; i += 8) {
    const __m256 qv = _mm256_loadu_ps(q + i);
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) acc[j] = _mm256_add_ps(acc[j], _mm256_mul_ps(qv, V::Load8(k[j] + kb, i)));
  }
}

// Decode reads each position's key and value rows of a head (hd elements, a KV row apart) from
// memory: the kernels ask for the rows kAttendAhead positions on (software prefetch) while they
// work on the current ones. llama-110m f16 (f32 KV) at depth 1536-1792 on a Zen 3, fixed: decode
// attention 1.33x the GEMVs' time without, 0.95x with (4 and 24 positions: no better).
inline constexpr int64_t kAttendAhead = 8;

// KvRows with the read-ahead every kernel below uses: at each position, bytes [off, off + bytes)
// of the key (or value) row kAttendAhead positions on, while that position is before `end`.
class KvStream {
 public:
  KvStream(const KvLayerView& kv, const int32_t* table, int64_t p, int64_t end)
      : at_(kv, table, p, end), ahead_(kv, table, std::min(p + kAttendAhead, end), end) {}
  const uint8_t* key(int64_t off) const { return at_.key(off); }
  const uint8_t* value(int64_t off) const { return at_.value(off); }
  // Asks for the row ahead, then steps both to the next position.
  void Next(bool value, int64_t off, int64_t bytes) {
    if (ahead_.valid()) {
      PrefetchSpan(value ? ahead_.value(off) : ahead_.key(off), bytes);
      ahead_.Next();
    }
    at_.Next();
  }

 private:
  KvRows at_, ahead_;
};

// o[j][d0, d0 + 8 * C) += sum over t in [t0, t1) of e[j][t - t0] * v_t, in position order, for
// the Q queries j (o loaded first when `accumulate`); kAhead: asking for the rows ahead
// (KvStream), else for rows already in cache (an earlier group's passes brought them).
template <int Q, int C, typename V, bool kAhead = true>
LLM42_AVX2 inline void ValueSums256(const KvLayerView& kv, const int32_t* table, int64_t off, int64_t d0, int64_t t0,
                                    int64_t t1, const float* const* e, float* const* o, bool accumulate) {
  __m256 acc[Q][C];
  for (int j = 0; j < Q; ++j) {
    for (int c = 0; c < C; ++c) acc[j][c] = accumulate ? _mm256_loadu_ps(o[j] + d0 + 8 * c) : _mm256_setzero_ps();
  }
  std::conditional_t<kAhead, KvStream, KvRows> rows(kv, table, t0, t1);
  for (int64_t t = t0; t < t1; ++t) {
    const uint8_t* v = rows.value(off);
    if constexpr (kAhead) {
      rows.Next(/*value=*/true, off + d0 * kv.elem, 8 * C * kv.elem);
    } else {
      rows.Next();
    }
    __m256 vv[C];
#pragma GCC unroll 8  // in full, so that vv and acc stay in registers
    for (int c = 0; c < C; ++c) vv[c] = V::Load8(v, d0 + 8 * c);
#pragma GCC unroll 4
    for (int j = 0; j < Q; ++j) {
      const __m256 ej = _mm256_set1_ps(e[j][t - t0]);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) acc[j][c] = _mm256_add_ps(acc[j][c], _mm256_mul_ps(ej, vv[c]));
    }
  }
  for (int j = 0; j < Q; ++j) {
    for (int c = 0; c < C; ++c) _mm256_storeu_ps(o[j] + d0 + 8 * c, acc[j][c]);
  }
}

// Value sums of Q (1 or 4) queries over [t0, t1) into o[j][0, hd): 24 columns at a time for four
// queries (12 accumulators; a 64-element head in three passes over the rows, not four), then 16,
// 64 for one (a 64-element head's value rows read in one pass, not two), then 8.
template <int Q, typename V, bool kAhead = true>
LLM42_AVX2 void ValueSumsAll256(const KvLayerView& kv, const int32_t* table, int64_t off, int64_t hd, int64_t t0,
                                int64_t t1, const float* const* e, float* const* o, bool accumulate) {
  constexpr int kWide = Q > 1 ? 3 : 8;
  int64_t d = 0;
  for (; d + 8 * kWide <= hd; d += 8 * kWide) {
    ValueSums256<Q, kWide, V, kAhead>(kv, table, off, d, t0, t1, e, o, accumulate);
  }
  if (Q > 1 && d + 16 <= hd) {
    ValueSums256<Q, 2, V, kAhead>(kv, table, off, d, t0, t1, e, o, accumulate);
    d += 16;
  }
  for (; d < hd; d += 8) ValueSums256<Q, 1, V, kAhead>(kv, table, off, d, t0, t1, e, o, accumulate);
}

// The same on 256-bit vectors: four keys' dot products at a time (independent chains), and the
// output kept in registers eight 8-column chunks at a time while the positions stream past
// (ValueSumsAll256), so each element still sees the same operations in the same order.
template <typename V, typename L>
LLM42_AVX2 Partial AttendRangeAvx2(const float* q, const KvLayerView& kv, const int32_t* table, int64_t off,
                                   int64_t hd, float scale, int64_t begin, int64_t end, float* scores, float* o) {
  const int64_t n = end - begin, full = hd / 8 * 8;
  auto tail = [&](const uint8_t* k, float s) {
    for (int64_t i = full; i < hd; ++i) s += q[i] * L::At(k, i);
    return s;
  };
  KvStream rows(kv, table, begin, end);
  int64_t t = 0;
  for (; t + 4 <= n; t += 4) {
    const uint8_t* k[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      k[j] = rows.key(off);
      rows.Next(/*value=*/false, off, hd * kv.elem);
    }
    __m256 acc[4];
    KeyDots<4, V>(q, k, 0, full, acc);
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) scores[t + j] = tail(k[j], FixedTreeSum(acc[j])) * scale;
  }
  for (; t < n; ++t, rows.Next(false, off, hd * kv.elem)) scores[t] = ScoreOne<V, L>(q, rows.key(off), hd) * scale;
  const Partial p = Exponentiate(scores, n, kv.softcap);
  ValueSumsAll256<1, V>(kv, table, off, full, begin, end, &scores, &o, false);
  for (int64_t d = full; d < hd; ++d) {
    float s = 0;
    KvRows values(kv, table, begin, end);
    for (t = 0; t < n; ++t, values.Next()) s += scores[t] * L::At(values.value(off), d);
    o[d] = s;
  }
  return p;
}

// A blocked call's queries padded to `padded` with zero queries whose scores and outputs go to
// scratch (their results are dropped), and the prefix [begin, common) that all of them share.
struct PaddedQueries {
  const float* q[kMaxBlockQueries];
  float* scores[kMaxBlockQueries];
  float* o[kMaxBlockQueries];
  int64_t common, shared;

  PaddedQueries(const float* const* qs, int n, int padded, int64_t hd, int64_t begin, const int64_t* end,
                float* const* sc, float* const* os) {
    std::vector<float>& zeros = ThreadScratch<std::vector<float>, struct AttentionZeros>();
    std::vector<float>& scratch_scores = ThreadScratch<std::vector<float>, struct AttentionScores>();
    std::vector<float>& scratch_o = ThreadScratch<std::vector<float>, struct AttentionOutputs>();
    common = end[0];
    for (int j = 0; j < n; ++j) common = std::min(common, end[j]);
    shared = common - begin;
    if (n < padded) {
      zeros.assign(static_cast<size_t>(hd), 0.0f);
      scratch_scores.resize(static_cast<size_t>(std::max<int64_t>(shared, 1)));
      scratch_o.resize(static_cast<size_t>(hd));
    }
    for (int j = 0; j < padded; ++j) {
      q[j] = j < n ? qs[j] : zeros.data();
      scores[j] = j < n ? sc[j] : scratch_scores.data();
      o[j] = j < n ? os[j] : scratch_o.data();
    }
  }
};

// Each real query's scores from t to its own end, one key at a time, then its softmax state.
template <typename V, typename L>
LLM42_AVX2 void ScoreRemainders(const PaddedQueries& pq, int n, const KvLayerView& kv, const int32_t* table,
                                int64_t off, int64_t hd, float scale, int64_t begin, int64_t t, const int64_t* end,
                                Partial* parts) {
  int64_t len[kMaxBlockQueries];
  for (int j = 0; j < n; ++j) {
    KvRows keys(kv, table, t, end[j]);
    for (int64_t u = t; u < end[j]; ++u, keys.Next()) {
      pq.scores[j][u - begin] = ScoreOne<V, L>(pq.q[j], keys.key(off), hd) * scale;
    }
    len[j] = end[j] - begin;
  }
  ExponentiateAll(pq.scores, len, n, parts, kv.softcap);
}

// The blocked kernel on 256-bit registers (AttendBlockFn; hd % 8 == 0): queries in groups of
// four. Scores of a group against two keys: eight 8-lane accumulators (query j, key i in
// a[2j + i]) reduced at once by FixedTreeSum8, so lane 2j + i holds that score.
template <typename V>
LLM42_AVX2 inline __m256 Scores4x2(const float* const* q, int64_t hd, const uint8_t* k0, const uint8_t* k1) {
  __m256 a[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) a[i] = _mm256_setzero_ps();
  for (int64_t i = 0; i < hd; i += 8) {
    const __m256 kv0 = V::Load8(k0, i), kv1 = V::Load8(k1, i);
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m256 qv = _mm256_loadu_ps(q[j] + i);
      a[2 * j] = _mm256_add_ps(a[2 * j], _mm256_mul_ps(qv, kv0));
      a[2 * j + 1] = _mm256_add_ps(a[2 * j + 1], _mm256_mul_ps(qv, kv1));
    }
  }
  return FixedTreeSum8(a);
}

template <typename V, typename L>
LLM42_AVX2 void AttendBlockAvx2(const float* const* q, int n, const KvLayerView& kv, const int32_t* table,
                                int64_t off, int64_t hd, float scale, int64_t begin, const int64_t* end,
                                float* const* scores, float* const* o, Partial* parts) {
  // Groups of four queries; those past n are zeros writing into scratch (their results dropped).
  const int padded = (n + 3) / 4 * 4;
  const PaddedQueries pq(q, n, padded, hd, begin, end, scores, o);
  const float* const* qs = pq.q;
  float* const* sc = pq.scores;
  float* const* os = pq.o;
  const int64_t common = pq.common, shared = pq.shared;
  // Scores over the shared prefix, two keys at a time; the rest (an odd last key, each query's
  // own remainder) one at a time.
  const __m256 vscale = _mm256_set1_ps(scale);
  int64_t t = begin;
  KvStream rows(kv, table, begin, common);
  for (; t + 2 <= common; t += 2) {
    const uint8_t* k0 = rows.key(off);
    rows.Next(/*value=*/false, off, hd * kv.elem);
    const uint8_t* k1 = rows.key(off);
    rows.Next(/*value=*/false, off, hd * kv.elem);
    for (int g = 0; g < padded; g += 4) {
      // Lanes (2j, 2j + 1) are query j's scores of the two keys: one 8-byte store per query.
      const __m256 s = _mm256_mul_ps(Scores4x2<V>(qs + g, hd, k0, k1), vscale);
      const __m128 lo = _mm256_castps256_ps128(s), hi = _mm256_extractf128_ps(s, 1);
      _mm_storel_pi(reinterpret_cast<__m64*>(sc[g] + (t - begin)), lo);
      _mm_storeh_pi(reinterpret_cast<__m64*>(sc[g + 1] + (t - begin)), lo);
      _mm_storel_pi(reinterpret_cast<__m64*>(sc[g + 2] + (t - begin)), hi);
      _mm_storeh_pi(reinterpret_cast<__m64*>(sc[g + 3] + (t - begin)), hi);
    }
  }
  ScoreRemainders<V, L>(pq, n, kv, table, off, hd, scale, begin, t, end, parts);
  // The first group's passes read the value rows ahead; the later groups find them in cache.
  for (int g = 0; g < padded; g += 4) {
    if (g == 0) {
      ValueSumsAll256<4, V>(kv, table, off, hd, begin, common, sc + g, os + g, false);
    } else {
      ValueSumsAll256<4, V, /*kAhead=*/false>(kv, table, off, hd, begin, common, sc + g, os + g, false);
    }
  }
  for (int j = 0; j < n; ++j) {
    if (end[j] > common) {
      const float* e = sc[j] + shared;
      ValueSumsAll256<1, V>(kv, table, off, hd, common, end[j], &e, &os[j], true);
    }
  }
}

// AttendHeadsFn on 256-bit registers (hd % 8 == 0): scores four heads at a time against each
// position's key row (independent chains, AttendRangeAvx2's per head), each head's softmax state,
// then each position's value row into every head's output, kept in memory (a head's outputs
// do not all fit in registers beside the others'): per element the same product and sum, in
// position order, as ValueSums256.
// Positions the heads kernel takes at a time: their rows (8 f32 rows of a 64-element, 12-head
// model: 24 KiB) stay in L1 while each head's slices are read, so each head keeps its query
// (keys) or its output (values) in registers across them instead of a load and a store per
// position and element. llama-110m's shape (12 heads of 64, f32 KV) at depth 1900 on a Zen 3,
// one thread: 14.0-14.6 ms per token's 12 layers (9.6-9.9 GB/s of KV) one position at a time,
// 11.2-11.5 (12.4 GB/s; a plain read of the same bytes 12.8-13.3) eight at a time.
constexpr int kHeadsWindow = 8;
// The heads kernel asks for the heads' part of each key (then value) row this many positions
// before it reads it (two windows on). One thread, 12 layers of llama-110m's KV at depth 1904
// (from memory), best of five, alternated, on a Zen 5: f16 KV 7.6-9.9 -> 11.5-11.8 GB/s; f32
// 13.6-15.8 either way (32 positions on, or into L2 only: no better).
inline constexpr int64_t kHeadsAhead = 16;

template <typename V, typename L>
LLM42_AVX2 void AttendHeadsAvx2(const float* q, int64_t h0, int64_t h1, int64_t group, const KvLayerView& kv,
                                const int32_t* table, int64_t hd, float scale, int64_t begin, int64_t end,
                                float* scores, float* o, Partial* parts) {
  constexpr int W = kHeadsWindow;
  static_assert(W == 8, "a window's scores are reduced by one FixedTreeSum8");
  const int64_t n = end - begin;
  auto off = [&](int64_t h) { return (h / group) * hd * kv.elem; };
  auto score = [&](int64_t h) { return scores + (h - h0) * n; };
  const __m256 vscale = _mm256_set1_ps(scale);
  // The heads' part of each stored row, asked for kHeadsAhead positions before it is read.
  const int64_t span_off = off(h0), span = off(h1 - 1) + hd * kv.elem - span_off;
  auto prefetch_window = [&](KvRows& ahead, bool value) {
    for (int i = 0; i < W && ahead.valid(); ++i, ahead.Next()) {
      PrefetchSpan(value ? ahead.value(span_off) : ahead.key(span_off), span);
    }
  };
  KvRows keys(kv, table, begin, end), keys_ahead(kv, table, std::min(begin + kHeadsAhead, end), end);
  for (int64_t t0 = 0; t0 < n; t0 += W) {
    prefetch_window(keys_ahead, false);
    const int w = static_cast<int>(std::min<int64_t>(W, n - t0));
    const uint8_t* rows[W];
    for (int i = 0; i < W; ++i) {  // a short window repeats its last row (computed, not stored)
      rows[i] = keys.key(0);
      if (i + 1 < w) keys.Next();
    }
    keys.Next();
    for (int64_t h = h0; h < h1; ++h) {
      __m256 acc[W];
      KeyDots<W, V>(q + h * hd, rows, off(h), hd, acc);
      const __m256 s = _mm256_mul_ps(FixedTreeSum8(acc), vscale);
      if (w == W) {
        _mm256_storeu_ps(score(h) + t0, s);
      } else {
        float all[W];
        _mm256_storeu_ps(all, s);
        std::copy(all, all + w, score(h) + t0);
      }
    }
  }
  for (int64_t h = h0; h < h1; h += 8) {
    const int count = static_cast<int>(std::min<int64_t>(8, h1 - h));
    float* rows[8];
    int64_t len[8];
    for (int i = 0; i < count; ++i) {
      rows[i] = score(h + i);
      len[i] = n;
    }
    ExponentiateAll(rows, len, count, parts + h, kv.softcap);
  }
  // Each head's output in registers over a window's value rows (still in cache for the next heads).
  KvRows values_ahead(kv, table, std::min(begin + kHeadsAhead, end), end);
  for (int64_t t0 = 0; t0 < n; t0 += W) {
    prefetch_window(values_ahead, true);
    const int64_t t1 = std::min(n, t0 + W);
    for (int64_t h = h0; h < h1; ++h) {
      const float* e = score(h) + t0;
      float* oh = o + h * hd;
      ValueSumsAll256<1, V, /*kAhead=*/false>(kv, table, off(h), hd, begin + t0, begin + t1, &e, &oh, t0 > 0);
    }
  }
}

// Eight stored elements from i in both halves of a register.
template <typename L>
LLM42_AVX512 inline __m512 Load8Twice(const uint8_t* p, int64_t i) {
  if constexpr (std::is_same_v<L, F16Loader>) {
    return _mm512_cvtph_ps(_mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i))));
  } else if constexpr (std::is_same_v<L, Bf16Loader>) {
    const __m512i h = _mm512_cvtepu16_epi32(
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i))));
    return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
  } else {
    return _mm512_broadcast_f32x8(_mm256_loadu_ps(reinterpret_cast<const float*>(p) + i));
  }
}

// Keys a (low half) and b (high half), eight elements from i.
template <typename L>
LLM42_AVX512 inline __m512 LoadKeyPair(const uint8_t* a, const uint8_t* b, int64_t i) {
  if constexpr (std::is_same_v<L, F16Loader>) {
    return _mm512_cvtph_ps(_mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + 2 * i))),
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 * i)), 1));
  } else if constexpr (std::is_same_v<L, Bf16Loader>) {
    const __m256i h = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + 2 * i))),
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 * i)), 1);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  } else {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(reinterpret_cast<const float*>(a) + i)),
                              _mm256_loadu_ps(reinterpret_cast<const float*>(b) + i), 1);
  }
}

// One query's scores against 32 keys k[0..31] (hd % 8 == 0), into s[0..31] unscaled: two keys
// per register, and FixedTreeSum16 laid out so that out[g] holds keys 16g..16g+15 in order.
template <typename L>
LLM42_AVX512 inline void Scores32(const float* q, int64_t hd, const uint8_t* const* k, float* s) {
  __m512 acc[2][2][4];  // [g][x or y][j]: x[j] = keys (j, j + 4), y[j] = keys (j + 8, j + 12) of 16g
  for (int g = 0; g < 2; ++g) {
    for (int h = 0; h < 2; ++h) {
      for (int j = 0; j < 4; ++j) acc[g][h][j] = _mm512_setzero_ps();
    }
  }
  for (int64_t i = 0; i < hd; i += 8) {
    const __m512 qv = _mm512_broadcast_f32x8(_mm256_loadu_ps(q + i));
#pragma GCC unroll 2
    for (int g = 0; g < 2; ++g) {
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          const int a = 16 * g + 8 * h + j;
          acc[g][h][j] = _mm512_add_ps(acc[g][h][j], _mm512_mul_ps(qv, LoadKeyPair<L>(k[a], k[a + 4], i)));
        }
      }
    }
  }
  _mm512_storeu_ps(s, FixedTreeSum16(acc[0][0], acc[0][1]));
  _mm512_storeu_ps(s + 16, FixedTreeSum16(acc[1][0], acc[1][1]));
}

// Scores of 4 * G queries against keys k[0..3] (hd % 8 == 0). Register p of pair-packed queries
// qp holds query 2p in lanes 0-7 and query 2p + 1 in lanes 8-15, eight elements per step:
// qp[(p * steps + s) * 16 + h * 8 + l] = q[2p + h][8s + l]. Reduced by FixedTreeSum16: out[g]
// holds, in quarter c, the scores of query 4g + c against keys 0..3.
template <int G, typename L>
LLM42_AVX512 inline void Scores4(const float* qp, int64_t steps, const uint8_t* const* k, __m512* out) {
  constexpr int P = 2 * G;
  __m512 acc[P][4];
  for (int p = 0; p < P; ++p) {
    for (int j = 0; j < 4; ++j) acc[p][j] = _mm512_setzero_ps();
  }
  for (int64_t s = 0; s < steps; ++s) {
    __m512 kb[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) kb[j] = Load8Twice<L>(k[j], 8 * s);
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      const __m512 qv = _mm512_loadu_ps(qp + (p * steps + s) * 16);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) acc[p][j] = _mm512_add_ps(acc[p][j], _mm512_mul_ps(qv, kb[j]));
    }
  }
#pragma GCC unroll 2
  for (int g = 0; g < G; ++g) out[g] = FixedTreeSum16(acc[2 * g], acc[2 * g + 1]);
}

// o[j][d0, d0 + 16 * C) += sum over t in [t0, t1) of e[j][t - t0] * v_t, in position order, for
// the Q queries j (C registers per query; o loaded first when `accumulate`).
template <int Q, int C, typename L>
LLM42_AVX512 inline void ValueSums(const KvLayerView& kv, const int32_t* table, int64_t off, int64_t d0, int64_t t0,
                                   int64_t t1, const float* const* e, float* const* o, bool accumulate) {
  __m512 acc[Q][C];  // every loop over it unrolled in full, so that it stays in registers
#pragma GCC unroll 8
  for (int j = 0; j < Q; ++j) {
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      acc[j][c] = accumulate ? _mm512_loadu_ps(o[j] + d0 + 16 * c) : _mm512_setzero_ps();
    }
  }
  KvStream rows(kv, table, t0, t1);
  for (int64_t t = t0; t < t1; ++t) {
    const uint8_t* v = rows.value(off);
    rows.Next(/*value=*/true, off + d0 * kv.elem, 16 * C * kv.elem);
    __m512 vv[C];
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) vv[c] = Load16<L>(v, d0 + 16 * c);
#pragma GCC unroll 8
    for (int j = 0; j < Q; ++j) {
      const __m512 ej = _mm512_set1_ps(e[j][t - t0]);
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) acc[j][c] = _mm512_add_ps(acc[j][c], _mm512_mul_ps(ej, vv[c]));
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < Q; ++j) {
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) _mm512_storeu_ps(o[j] + d0 + 16 * c, acc[j][c]);
  }
}

// Value sums of Q queries over [t0, t1) into o[j][0, hd) (hd % 16 == 0): 32 columns at a time
// for 8 queries (16 accumulators), 64 for 4 or fewer.
template <int Q, typename L>
LLM42_AVX512 void ValueSumsAll(const KvLayerView& kv, const int32_t* table, int64_t off, int64_t hd, int64_t t0,
                               int64_t t1, const float* const* e, float* const* o, bool accumulate) {
  constexpr int kWide = Q > 4 ? 2 : 4;
  int64_t d = 0;
  for (; d + 16 * kWide <= hd; d += 16 * kWide) ValueSums<Q, kWide, L>(kv, table, off, d, t0, t1, e, o, accumulate);
  for (; d < hd; d += 16) ValueSums<Q, 1, L>(kv, table, off, d, t0, t1, e, o, accumulate);
}

// One query on 512-bit registers (hd % 16 == 0): scores 32 keys at a time, value sums 64
// columns at a time.
template <typename V, typename L>
LLM42_AVX512 Partial AttendRangeAvx512(const float* q, const KvLayerView& kv, const int32_t* table, int64_t off,
                                       int64_t hd, float scale, int64_t begin, int64_t end, float* scores, float* o) {
  const int64_t n = end - begin;
  const __m512 vscale = _mm512_set1_ps(scale);
  KvStream rows(kv, table, begin, end);
  int64_t t = 0;
  for (; t + 32 <= n; t += 32) {
    const uint8_t* k[32];
    for (int j = 0; j < 32; ++j) {
      k[j] = rows.key(off);
      rows.Next(/*value=*/false, off, hd * kv.elem);
    }
    Scores32<L>(q, hd, k, scores + t);
    _mm512_storeu_ps(scores + t, _mm512_mul_ps(_mm512_loadu_ps(scores + t), vscale));
    _mm512_storeu_ps(scores + t + 16, _mm512_mul_ps(_mm512_loadu_ps(scores + t + 16), vscale));
  }
  for (; t < n; ++t, rows.Next(false, off, hd * kv.elem)) scores[t] = ScoreOne<V, L>(q, rows.key(off), hd) * scale;
  const Partial p = Exponentiate(scores, n, kv.softcap);
  const float* e = scores;
  ValueSumsAll<1, L>(kv, table, off, hd, begin, end, &e, &o, false);
  return p;
}

template <int G, typename V, typename L>
LLM42_AVX512 void AttendBlockQ(const float* const* q, int n, const KvLayerView& kv, const int32_t* table,
                               int64_t off, int64_t hd, float scale, int64_t begin, const int64_t* end,
                               float* const* scores, float* const* o, Partial* parts) {
  constexpr int Q = 4 * G;
  const int64_t steps = hd / 8;
  // Queries past n are zeros writing into scratch (their results are dropped).
  const PaddedQueries pq(q, n, Q, hd, begin, end, scores, o);
  const float* const* qs = pq.q;
  float* const* sc = pq.scores;
  float* const* os = pq.o;
  const int64_t common = pq.common, shared = pq.shared;
  std::vector<float>& qp = ThreadScratch<std::vector<float>, struct AttentionQueryPanel>();
  qp.resize(static_cast<size_t>(Q / 2 * steps * 16));
  for (int p = 0; p < Q / 2; ++p) {
    for (int64_t s = 0; s < steps; ++s) {
      for (int h = 0; h < 2; ++h) std::copy_n(qs[2 * p + h] + 8 * s, 8, qp.data() + (p * steps + s) * 16 + h * 8);
    }
  }
  // Scores over the shared prefix, four keys at a time, then one at a time; each query's own
  // remainder alone.
  const __m512 vscale = _mm512_set1_ps(scale);
  int64_t t = begin;
  KvStream rows(kv, table, begin, common);
  for (; t + 4 <= common; t += 4) {
    const uint8_t* k[4];
    for (int j = 0; j < 4; ++j) {
      k[j] = rows.key(off);
      rows.Next(/*value=*/false, off, hd * kv.elem);
    }
    __m512 out[G];
    Scores4<G, L>(qp.data(), steps, k, out);
#pragma GCC unroll 2
    for (int g = 0; g < G; ++g) {
      const __m512 scaled = _mm512_mul_ps(out[g], vscale);
      _mm_storeu_ps(sc[4 * g] + (t - begin), _mm512_castps512_ps128(scaled));
      _mm_storeu_ps(sc[4 * g + 1] + (t - begin), _mm512_extractf32x4_ps(scaled, 1));
      _mm_storeu_ps(sc[4 * g + 2] + (t - begin), _mm512_extractf32x4_ps(scaled, 2));
      _mm_storeu_ps(sc[4 * g + 3] + (t - begin), _mm512_extractf32x4_ps(scaled, 3));
    }
  }
  ScoreRemainders<V, L>(pq, n, kv, table, off, hd, scale, begin, t, end, parts);
  ValueSumsAll<Q, L>(kv, table, off, hd, begin, common, sc, os, false);
  for (int j = 0; j < n; ++j) {
    if (end[j] > common) {
      const float* e = sc[j] + shared;
      ValueSumsAll<1, L>(kv, table, off, hd, common, end[j], &e, &os[j], true);
    }
  }
}

template <typename V, typename L>
LLM42_AVX512 void AttendBlockAvx512(const float* const* q, int n, const KvLayerView& kv, const int32_t* table,
                                    int64_t off, int64_t hd, float scale, int64_t begin, const int64_t* end,
                                    float* const* scores, float* const* o, Partial* parts) {
  // Sub-blocks of up to eight queries (two per register), one after another while the range's
  // rows are warm in cache.
  for (int j = 0; j < n; j += 8) {
    const int m = std::min(8, n - j);
    if (m > 4) {
      AttendBlockQ<2, V, L>(q + j, m, kv, table, off, hd, scale, begin, end + j, scores + j, o + j, parts + j);
    } else {
      AttendBlockQ<1, V, L>(q + j, m, kv, table, off, hd, scale, begin, end + j, scores + j, o + j, parts + j);
    }
  }
}
#endif  // __x86_64__

template <typename L, typename V>
AttendRangeFn AttendRangeFor(bool simd, int64_t hd) {
#if defined(__x86_64__)
  if (simd && CpuHasAvx512() && hd % 16 == 0) return AttendRangeAvx512<V, L>;
  if (simd && CpuHasAvx2()) return AttendRangeAvx2<V, L>;
#endif
  (void)simd, (void)hd;
  return AttendRangePortable<L>;
}

template <typename L, typename V>
AttendBlockFn AttendBlockFor(bool simd, int64_t hd) {
#if defined(__x86_64__)
  if (simd && CpuHasAvx512() && hd % 16 == 0) return AttendBlockAvx512<V, L>;
  if (simd && CpuHasAvx2() && hd % 8 == 0) return AttendBlockAvx2<V, L>;
#endif
  (void)simd, (void)hd;
  return nullptr;
}

template <typename L, typename V>
AttendHeadsFn AttendHeadsFor(bool simd, int64_t hd) {
#if defined(__x86_64__)
  if (simd && CpuHasAvx2() && hd % 8 == 0) return AttendHeadsAvx2<V, L>;
#endif
  (void)simd, (void)hd;
  return nullptr;
}

}  // namespace

#if !defined(__x86_64__)
struct F32Vec {};
struct F16Vec {};
struct Bf16Vec {};
#endif

AttendRangeFn SelectAttendRange(KvDtype dtype, bool simd, int64_t hd) {
  switch (dtype) {
    case KvDtype::kF16: return AttendRangeFor<F16Loader, F16Vec>(simd, hd);
    case KvDtype::kBf16: return AttendRangeFor<Bf16Loader, Bf16Vec>(simd, hd);
    default: return AttendRangeFor<F32Loader, F32Vec>(simd, hd);
  }
}

AttendBlockFn SelectAttendBlock(KvDtype dtype, bool simd, int64_t hd) {
  switch (dtype) {
    case KvDtype::kF16: return AttendBlockFor<F16Loader, F16Vec>(simd, hd);
    case KvDtype::kBf16: return AttendBlockFor<Bf16Loader, Bf16Vec>(simd, hd);
    default: return AttendBlockFor<F32Loader, F32Vec>(simd, hd);
  }
}

AttendHeadsFn SelectAttendHeads(KvDtype dtype, bool simd, int64_t hd) {
  switch (dtype) {
    case KvDtype::kF16: return AttendHeadsFor<F16Loader, F16Vec>(simd, hd);
    case KvDtype::kBf16: return AttendHeadsFor<Bf16Loader, Bf16Vec>(simd, hd);
    default: return AttendHeadsFor<F32Loader, F32Vec>(simd, hd);
  }
}

void Combine(Partial& a, float* oa, const Partial& b, const float* ob, int64_t hd) {
  const float m = std::max(a.max, b.max);
  const float ca = PortableExpf(a.max - m), cb = PortableExpf(b.max - m);
  a.sum = a.sum * ca + b.sum * cb;
  for (int64_t d = 0; d < hd; ++d) oa[d] = oa[d] * ca + ob[d] * cb;
  a.max = m;
}

void Normalize(Partial total, const float* sink, float* o, int64_t hd) {
  if (sink != nullptr) {  // Combine's arithmetic with a partial of one score and no value
    const float m = std::max(total.max, *sink);
    const float c = PortableExpf(total.max - m);
    total.sum = total.sum * c + PortableExpf(*sink - m);
    for (int64_t d = 0; d < hd; ++d) o[d] *= c;
  }
  const float inv = 1.0f / total.sum;
  for (int64_t d = 0; d < hd; ++d) o[d] *= inv;
}

}  // namespace llm42::internal
