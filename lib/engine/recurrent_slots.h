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
// - a sequence's first row at position 0 starts from zeros (a new or preempted request: without
//   a prefix cache of states, a preempted one recomputes its prefix).
// The last slot is the padding rows' (ModelRunner).
class RecurrentSlots {
 public:
  RecurrentSlots() = default;
  // `sequences`: KV-cache sequence ids that may be alive at once (they index the slots);
  // `scratch`: verify rows a step may hold.
  RecurrentSlots(int64_t sequences, int64_t scratch) : sequences_(sequences), scratch_(scratch) {}
  bool on() const { return sequences_ > 0; }
  int64_t sequences() const { return sequences_; }
  int64_t scratch_slots() const { return scratch_; }
  int64_t n_slots() const { return 2 * sequences_ + scratch_ + 1; }
  int32_t live(int32_t seq) const { return seq; }
  int32_t candidates(int32_t seq) const { return static_cast<int32_t>(sequences_ + seq); }
  int32_t scratch(int64_t i) const { return static_cast<int32_t>(2 * sequences_ + i); }

 private:
  int64_t sequences_ = 0, scratch_ = 0;
};

}  // namespace llm42

#endif  // LLM42_ENGINE_RECURRENT_SLOTS_H_
