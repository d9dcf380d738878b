#ifndef LLM42_BACKEND_CPU_ATTENTION_H_
#define LLM42_BACKEND_CPU_ATTENTION_H_

#include <cmath>
#include <cstdint>

#include "lib/backend/backend.h"

namespace llm42::internal {

// One layer of the paged KV storage: position p of a sequence with block table T lives in
// block T[p / block_size], row p % block_size; its keys start at element
// T[p / block_size] * block_stride + (p % block_size) * kv_dim of base, its values v_offset
// elements further; elements are `elem` bytes (f32, f16 or bf16).
struct KvLayerView {
  const uint8_t* base = nullptr;
  int64_t block_stride = 0;
  int64_t v_offset = 0;
  int32_t block_size = 0;
  int64_t kv_dim = 0;
  int64_t elem = 4;
  // Scores are soft-capped, score = softcap * tanh(score / softcap) (PortableSoftCap), after the
  // scale and before the softmax, by every kernel; 0: not (AttentionShape::softcap).
  float softcap = 0;

  __attribute__((always_inline)) const uint8_t* key(const int32_t* table, int64_t p) const {
    return base + (table[p / block_size] * block_stride + (p % block_size) * kv_dim) * elem;
  }
  const uint8_t* value(const int32_t* table, int64_t p) const { return key(table, p) + v_offset * elem; }
};

// Softmax state of attention over part of a prefix: max score, sum of exp(score - max), and
// (beside it, in the caller's buffer) the exp-weighted sum of values.
struct Partial {
  float max = -INFINITY;
  float sum = 0;
};

// The attention kernels' one arithmetic, which every kernel below gives bit for bit (so the
// fixed schedule's bits depend neither on the CPU nor on which queries run together): for a
// query q over positions [begin, end) of one KV head (its keys and values `off` bytes into each
// stored row), score t = (q . k_t with 8 lane accumulators, lane l summing elements l, l+8, ...
// as a product then a sum, the reduction tree ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)), then the
// tail elements in order) * scale; e_t = PortableExpf(score t - max), summed in position order;
// o[d] = sum over t in position order of e_t * v_t[d], each a product then a sum (the build
// compiles with -ffp-contract=off, so nothing is fused). Returns the softmax state and writes
// the unnormalized output to o[hd]; `scores` is scratch of end - begin floats.
using AttendRangeFn = Partial (*)(const float* q, const KvLayerView& kv, const int32_t* table, int64_t off,
                                  int64_t hd, float scale, int64_t begin, int64_t end, float* scores, float* o);

// The one-query kernel for this CPU, KV element type and head size: 512-bit vectors where the
// CPU has AVX-512 (F, DQ) and hd is a multiple of 16 (two keys' 8 lanes per register, 32 scores
// reduced at once), 256-bit ones where it has AVX2 (and simd), else portable scalar code.
AttendRangeFn SelectAttendRange(KvDtype dtype, bool simd, int64_t hd);

// Up to kMaxBlockQueries queries that share a KV head and a block table, each over its own
// [begin, end[j]): AttendRange's arithmetic for each query, computed together — every key row is
// loaded once for all of them (AVX2; the value rows once per group of four) or once per
// sub-block of eight (AVX-512, whose 512-bit registers hold two queries' 8 lanes), and the
// reduction trees of 16 (AVX2: 8) scores run at once on transposed registers. The shared prefix
// [begin, min end) runs blocked; each query's own remainder runs alone. parts[j], o[j] (hd
// floats) and scores[j] (end[j] - begin floats) as AttendRange's.
//
// 32 rather than 8 queries: a prompt's block reads its KV head's rows of a chunk (64 KiB of keys
// and as much of values for 256 positions of a 64-element f32 head) from L3 once per block, and
// a head's whole prefix does not stay in L2 from one block to the next; on a Zen 3 (AVX2) a
// 512-token prompt at depth 1024 took 543-684 ms of attention (12 layers) against 709-822 with 8.
inline constexpr int kMaxBlockQueries = 32;
using AttendBlockFn = void (*)(const float* const* q, int n, const KvLayerView& kv, const int32_t* table,
                               int64_t off, int64_t hd, float scale, int64_t begin, const int64_t* end,
                               float* const* scores, float* const* o, Partial* parts);

// The blocked kernel where simd and the CPU has AVX-512 (F, DQ; hd a multiple of 16) or AVX2 (hd
// a multiple of 8); else nullptr (the caller runs the one-query kernel per query).
AttendBlockFn SelectAttendBlock(KvDtype dtype, bool simd, int64_t hd);

// Query heads [h0, h1) of one token (a decode row: its sequence's only query in the step) over
// positions [begin, end): AttendRange's arithmetic for each head, computed position by position —
// each position's key row and then its value row read once for all those heads, in memory
// order, where AttendRange reads one head's slice of every row (a strided pass per head; on a
// Zen 3, 256-byte slices 3 KiB apart stream at about half the rate of whole rows). q holds the
// token's n_head queries of hd floats; query head h reads KV head h / group. scores: (h1 - h0) *
// (end - begin) floats of scratch; o: the token's n_head * hd outputs, of which heads [h0, h1) are
// written; parts: its n_head softmax states, likewise.
using AttendHeadsFn = void (*)(const float* q, int64_t h0, int64_t h1, int64_t group, const KvLayerView& kv,
                               const int32_t* table, int64_t hd, float scale, int64_t begin, int64_t end,
                               float* scores, float* o, Partial* parts);

// The heads kernel where simd and the CPU has AVX2 (hd a multiple of 8; its 256-bit arithmetic is
// every kernel's, so AVX-512 CPUs run it too); else nullptr (the caller runs AttendRange per head).
AttendHeadsFn SelectAttendHeads(KvDtype dtype, bool simd, int64_t hd);

// Folds partial b (output ob) into a (output oa).
void Combine(Partial& a, float* oa, const Partial& b, const float* ob, int64_t hd);
// The unnormalized output o of a query's whole range (state `total`) divided by its softmax's sum,
// which also counts exp(*sink) where the head has a sink (AttentionShape::sinks; nullptr: none):
// the sink folded in as Combine folds a partial of one score, then o[d] *= 1 / sum. Every path's
// last step, so that all give the same bits.
void Normalize(Partial total, const float* sink, float* o, int64_t hd);

}  // namespace llm42::internal

#endif  // LLM42_BACKEND_CPU_ATTENTION_H_
