#ifndef LLM42_ENGINE_RECURRENT_SLOTS_H_
#define LLM42_ENGINE_RECURRENT_SLOTS_H_

#include <cstdint>

#include "lib/backend/backend.h"

namespace llm42 {

// Where a model with recurrent layers (gated DeltaNet: Qwen3.5) keeps each sequence's state, in
// the backend's slots (ModelRunner::AllocateRecurrent), and what each batch row does with it
// (RecurrentRow). Beside the paged KV cache, the state is the other memory a sequence's tokens
// leave behind, and everything that rewinds K/V rewinds it:
// - live(seq): the state after the sequence's last computed position that no rollback takes back
//   (a plain request's every row; a deterministic request's rows under fixed: its prefill, its
//   direct decodes, its verify rows);
// - candidates(seq): a deterministic request's fast-path candidates advance a copy of it, taken
//   from live at the first candidate of each window, so that the verify pass replays from live;
// - scratch(i): the state after each verify row but the last (the i-th verify row of a step):
//   the pass commits the candidates up to a disagreement, and the state after the last row it
//   keeps is copied back into live (Engine::SettleRecurrent) — a checkpoint per verify row rather
//   than a recompute from one, which would run the window's rows a second time;
// - snapshot(k): the prefix cache's snapshots (KvCache::EnableSnapshots): the state after a cached
//   block's last position, written by the row that computes it (a verify row's from its scratch
//   slot after the pass), so that a request whose prefix the cache holds — a new one, a preempted
//   one readmitted, a saved conversation continued — starts from the snapshot of the last block it
//   maps, bitwise the state a cold run reaches there;
// - a sequence's first row after admission starts from that snapshot, or from zeros at position 0.
// The last slot is the padding rows' (ModelRunner).
class RecurrentSlots {
 public:
  RecurrentSlots() = default;
  // `sequences`: KV-cache sequence ids that may be alive at once (they index the slots);
  // `scratch`: verify rows a step may hold; `snapshots`: the cache's snapshot ids.
  RecurrentSlots(int64_t sequences, int64_t scratch, int64_t snapshots)
      : sequences_(sequences), scratch_(scratch), snapshots_(snapshots) {}
  bool on() const { return sequences_ > 0; }
  int64_t sequences() const { return sequences_; }
  int64_t scratch_slots() const { return scratch_; }
  int64_t snapshots() const { return snapshots_; }
  int64_t n_slots() const { return 2 * sequences_ + scratch_ + snapshots_ + 1; }
  int32_t live(int32_t seq) const { return seq; }
  int32_t candidates(int32_t seq) const { return static_cast<int32_t>(sequences_ + seq); }
  int32_t scratch(int64_t i) const { return static_cast<int32_t>(2 * sequences_ + i); }
  int32_t snapshot(int32_t id) const { return static_cast<int32_t>(2 * sequences_ + scratch_ + id); }

 private:
  int64_t sequences_ = 0, scratch_ = 0, snapshots_ = 0;
};

}  // namespace llm42

#endif  // LLM42_ENGINE_RECURRENT_SLOTS_H_
