#pragma once
// engine/scheduling: the engine's scheduling policy as pure functions over plain data, kept
// apart from the actors that carry it out, as vLLM v1's scheduler returns its plan as data
// (schedule → execute → update). It belongs to the core layer, above engine/request, engine/kv
// and engine/speculation, and below the actors: nothing here posts a message, takes a page
// from the pool, runs a proposer of its own or changes a Sequence, so every rule can be tested
// without a model or a thread.
//
// The step planner decides what one decode step computes. Every decoding sequence's next
// token comes first (latency stays flat), then prefill chunks in admission order, each at most
// prefill_chunk tokens and cut to what is left of max_tokens_per_step, until the budget or
// max_entries_per_step runs out. A chunk that first feeds an image also pays for encoding it
// (SequenceImage::cost_tokens); when that does not fit, the chunk stops before the image, or,
// with nothing before it, waits for a step with room — except the step's first chunk, which
// always runs, so a large image cannot wait forever. Nor does a chunk cut an image whose rows
// attend both ways (Gemma 3's, SequenceImage::bidirectional): it stops before one, and a chunk
// that starts with one takes it whole when it is the step's first chunk — past prefill_chunk
// and the budget if it must, else an image larger than they are could never run — and otherwise
// waits for a step where it is. Without mixed-adapter batches a step serves only the adapter
// (or the base model) whose turn it is. Guesses for speculating decodes take only what is left
// of the budget after that, and only in steps with at most speculative_max_batch decodes. When
// the pool cannot give the step its pages, speculation steps aside first, then the most
// recently admitted sequence is preempted, and the step is planned again.
//
// A step is planned in phases around what only the actor can do:
//   1. plan_entries: the entries, the pages their new positions need, and the guess budget;
//   2. hand_out_guesses: the actor's proposer is asked, decode by decode, for guesses within
//      what is left of the budget. The guess counts cannot be inputs of a single pure call:
//      a proposer makes fewer guesses than it is allowed, proposing changes the sequence (the
//      draft length's pause counts down, a draft model feeds its cache), and each decode's
//      limit is what the ones before it left. The actor then lets the draft model guess for
//      all its sequences at once and reports the guesses each decode got (set_guesses, which
//      counts their pages too);
//   3. the actor asks the pool for plan.pages. The pool's free pages are known only to the
//      page-pool actor, which admissions draw on at the same time, so its answer is an input,
//      not a number the planner reads;
//   4. make_room, when the pool refused: what gives way before the step is planned again.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/kv/block_table.h"
#include "engine/request/sequence.h"
#include "pagoda/engine_config.h"

namespace pagoda::scheduling {

// What the planner reads of one running sequence.
struct SequenceView {
  SequenceStatus status = SequenceStatus::Prefilling;  // only Decoding and Prefilling ones are planned
  int32_t pending = 0;                                 // tokens not in the KV cache yet
  int32_t n_cached = 0;                                // positions whose K/V are in the cache
  const LoraWeights* adapter = nullptr;                // compared, never read; null: the base model
  const BlockTable* table = nullptr;                   // what more positions cost in pages
  std::span<const SequenceImage> images;               // its prompt's images, by position
};

// What the planner reads of `seq` (inline: the scheduler views every running sequence every step).
inline SequenceView view_of(const Sequence& seq) {
  return {seq.status, seq.pending(), seq.n_cached, seq.lora.get(), &seq.table, seq.images};
}

// One sequence's part of the step.
struct PlannedEntry {
  size_t sequence = 0;   // index into the running sequences the plan was made from
  int32_t n_tokens = 0;  // tokens fed: a decode's last token and its guesses, or a prefill chunk
  int32_t guesses = 0;   // a decode's guesses in this entry (0: it decodes plainly)
  int32_t pages = 0;     // pages its new positions need
};

struct StepPlan {
  std::vector<PlannedEntry> entries;  // the decodes first, then the prefill chunks
  size_t decodes = 0;                 // entries[0, decodes) are decodes
  int32_t guess_budget = 0;           // tokens guesses may still take; 0 when the step does not speculate
  int32_t pages = 0;                  // the pages every entry together needs

  // Some decode feeds guesses.
  bool speculates() const;
};

// What gives way when the pool cannot give a plan its pages; the step is planned again after.
struct Relief {
  bool drop_speculation = false;  // plan again without guesses
  size_t victim = 0;              // else: the running sequence to preempt (the most recently admitted)
};

class StepPlanner {
 public:
  explicit StepPlanner(const EngineConfig& config);

  // Plans the entries of a step over `running` (in admission order; not empty) and their pages
  // into `plan` (its vectors are reused). Without mixed-adapter batches only the sequences sharing
  // running[turn % size]'s adapter are planned. With `speculate` false (speculation stepped
  // aside in this step) or more than speculative_max_batch decodes, the guess budget is 0.
  void plan_entries(std::span<const SequenceView> running, size_t turn, bool speculate, StepPlan& plan) const;

  // Hands what is left of the budget to the plan's decodes, in order, as long as some is
  // left: `propose(entry, limit)` (entry indexes plan.entries) asks the proposer for at most
  // `limit` guesses and returns how many the budget loses (a draft model's wanted guesses
  // count whether or not they come).
  template <class Propose>
  static void hand_out_guesses(StepPlan& plan, Propose&& propose) {
    for (size_t i = 0; i < plan.decodes && plan.guess_budget > 0; ++i) {
      plan.guess_budget -= propose(i, plan.guess_budget);
    }
  }

  // Decode `entry` (planned without guesses) feeds `guesses` guesses after its last token; its
  // pages and plan.pages follow. `running` is what the plan was made from.
  static void set_guesses(std::span<const SequenceView> running, StepPlan& plan, size_t entry, int32_t guesses);

  // The pool refused plan.pages: guesses give way first, then the last of `n_running`
  // sequences, the most recently admitted.
  static Relief make_room(const StepPlan& plan, size_t n_running);

 private:
  int32_t max_tokens_;
  int32_t max_entries_;
  int32_t prefill_chunk_;
  int32_t speculative_max_batch_;
  bool mixed_adapter_batches_;
};

}  // namespace pagoda::scheduling
