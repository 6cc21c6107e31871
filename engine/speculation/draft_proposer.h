#pragma once
// The draft-model proposer: a smaller model with the same vocabulary guesses each drafting
// sequence's next tokens greedily, one forward pass per guess for all of the step's drafting
// sequences at once, and the step's verification keeps what the model itself would have
// sampled. The draft has its own ModelRunner and its own PagePool (no prefix cache, touched by
// the decode scheduler's thread only), and keeps, per sequence, the K/V of the tokens it has
// seen (SpeculationState::draft_tokens): after verification the positions of rejected guesses
// are rolled back and the pages only they reached go back to its pool; a sequence that ends or
// is preempted gives all of its draft pages back, and a preempted one's draft cache is simply
// recomputed when it drafts again. Until the draft is trusted (DraftLength::trusted) it reads
// only the first token and the last draft_probe tokens of a sequence; once trusted, its
// cache is dropped and it reads the whole context, one prefill chunk per step.

#include <memory>
#include <span>
#include <vector>

#include "engine/forward/model_runner.h"
#include "engine/kv/page_pool.h"
#include "engine/model/model.h"
#include "engine/metrics/metrics_board.h"
#include "engine/speculation/speculation_state.h"
#include "pagoda/engine_config.h"

namespace pagoda::speculation {

// A drafting sequence as the draft sees it: its speculation state and its tokens (the prompt,
// then the output), which the draft reads and never changes.
struct DraftingSequence {
  SpeculationState* spec;
  std::span<const int32_t> tokens;
};

class DraftProposer {
 public:
  // Loads config.draft_model_path. `target` is the model it drafts for, whose KV cache holds
  // `target_positions` token positions (the draft pool's default size). Throws pagoda::Error
  // naming both files when the vocabularies differ (token count or any token's text).
  DraftProposer(const EngineConfig& config, const Model& target, int64_t target_positions, MetricsBoard& metrics);

  // Asks the draft for the guesses of `seqs` (each in Draft mode, with its rows holding its
  // last token and spec.draft_wanted > 0), appending them to each one's rows; the draft stops
  // early at a token less likely than draft_p_min. A sequence whose draft cache cannot get its
  // pages (or is beyond the draft's context), is more than one prefill_chunk behind its tokens
  // (it is fed one chunk in this step), or whose guess is shorter than draft_min, is left with
  // empty rows: it decodes plainly in this step; the last case counts as a miss in its
  // DraftLength.
  void propose(std::span<const DraftingSequence> seqs);
  // After verification: forgets the draft K/V of positions where `seq`'s tokens no longer
  // agree with what the draft was fed (rejected guesses), releasing pages beyond the rest.
  void rollback(const DraftingSequence& seq);
  // Gives back every draft page of a sequence (it ended or was preempted).
  void release(SpeculationState& spec);

  const Model& model() const { return model_; }

 private:
  // Keeps the first `n` positions of a sequence's draft cache.
  void truncate(SpeculationState& spec, int32_t n);
  void publish();

  Model model_;
  ModelRunner runner_;
  PagePool pool_;
  MetricsBoard& metrics_;
  int32_t chunk_;  // catch-up tokens of one sequence in one draft pass (the engine's prefill_chunk)
  std::vector<DraftingSequence> active_, going_;
  Batch batch_;
  std::vector<float> logits_;
};

}  // namespace pagoda::speculation
