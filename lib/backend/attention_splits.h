#ifndef LLM42_BACKEND_ATTENTION_SPLITS_H_
#define LLM42_BACKEND_ATTENTION_SPLITS_H_

#include <cstdint>
#include <span>
#include <vector>

#include "lib/backend/backend.h"

namespace llm42 {

// How a device's attention splits a batch's rows over its blocks (flash-decoding): a row's
// context — positions [AttentionShape::first_position, position] — runs as consecutive spans of
// `span_length` positions (the last one the rest), one block each, whose partial softmax states
// are then merged in span order. Device-free, so that the rule is tested on any machine
// (tests/attention_splits_test.cc); the CUDA backend runs it (lib/backend/cuda).
//
// - A `fixed` row splits by a constant *size*: once its context passes kFixedAttentionSpan
//   positions it runs as spans of exactly that many (the last one the rest), counted from its
//   first position. Its spans, their arithmetic and the merge's order depend only on its own
//   context, never on the batch, so its bits are the same in every batch, prefill or decode.
//   kFixedAttentionSpan is part of the fixed schedule (kFixedScheduleVersion).
// - `fast` rows of a prefill chunk (a run of at least kMinTiledRun rows of one sequence at
//   consecutive positions) run as query tiles of up to kAttentionTileRows rows, one block per
//   (tile, head), which reads each key and value once for the whole tile.
// - Other `fast` rows split only when the batch's (row, head) blocks alone would leave the
//   device under-filled (fewer than `device_blocks`): into spans of at least kMinAttentionSpan
//   positions (a multiple of 64), as many as fill the device for the longest context.
// A fast row's bits may then depend on the batch, as fast's may.
//
// Split rows keep each span's partial state until the merge: rows run in waves whose partial
// states fit `max_partial_slots` (row, span) slots, so that a long fixed prefill chunk needs a
// bounded scratch. A row's arithmetic is the same in any wave.
inline constexpr int32_t kFixedAttentionSpan = 256;
inline constexpr int32_t kMinAttentionSpan = 128;
inline constexpr int32_t kAttentionTileRows = 32;
inline constexpr int32_t kMinTiledRun = 8;

struct AttentionSplits {
  // Per row: (span length, span count): the count 1 (and the length 0) for an unsplit row, 0
  // for a row of a tile.
  std::vector<int32_t> rows;
  int32_t max_spans = 1;  // the most spans of any row
  // Per wave: (first row, rows, the most spans of its rows); the rows of all waves in order, a
  // wave's partial states rows x its most spans slots.
  std::vector<int32_t> waves;
  // Per query tile: (first row, rows), its rows consecutive in the batch, one sequence's.
  std::vector<int32_t> tiles;
};

// The plan for rows at `positions` of sequences `sequences` (per row, anything that tells one
// sequence from another: its block table), each attending to its own context under `window`
// (0: the whole prefix), with n_head heads, under schedules `s`, on a device that runs
// `device_blocks` blocks at once, with room for `max_partial_slots` (row, span) partial states
// (a wave holds one row whatever its spans).
AttentionSplits PlanAttentionSplits(std::span<const int32_t> positions, std::span<const void* const> sequences,
                                    Schedules s, int64_t window, int64_t n_head, int64_t device_blocks,
                                    int64_t max_partial_slots);

}  // namespace llm42

#endif  // LLM42_BACKEND_ATTENTION_SPLITS_H_
