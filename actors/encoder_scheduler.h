#pragma once
// The encoder scheduler actor: runs an encoder model's requests (embeddings and rerank scores;
// an encoder generates nothing). Each step takes the waiting sequences in arrival order, each
// whole — a non-causal model sees its whole input at once, so an input is never chunked — up
// to max_tokens_per_step tokens and max_entries_per_step sequences (an input longer than the
// token budget runs alone), computes them in one EncoderRunner pass, pools each one's rows and
// resolves its future. Nothing outlives the step: there is no KV cache to keep, so no pages,
// no preemption. Requests that arrive during a step join the next one.

#include <deque>
#include <span>
#include <vector>

#include "actors/actor.h"
#include "actors/messages.h"
#include "engine/forward/encoder_runner.h"
#include "engine/metrics/metrics_board.h"
#include "pagoda/engine_config.h"

namespace pagoda {

class EncoderScheduler : public Actor<EncoderMessage> {
 public:
  EncoderScheduler(EncoderRunner& runner, const EngineConfig& config, MetricsBoard& metrics);

  // Cancels what is left in the mailbox after the actor stopped (shutdown).
  void drain();

 private:
  void run() override;
  void handle(EncoderMessage message) override;
  void step();
  // Gives each sequence of the step its rows of hidden_ and, for a reranker, its score.
  void pool();
  void retire(Sequence& seq, FinishReason reason, std::string error = {});

  EncoderRunner& runner_;
  int32_t max_tokens_, max_entries_;
  MetricsBoard& metrics_;
  std::deque<SequencePtr> waiting_;  // in arrival order

  // This step's sequences and scratch, reused so steps do not allocate.
  std::vector<SequencePtr> step_;
  std::vector<std::span<const int32_t>> inputs_;
  std::vector<float> hidden_, rank_rows_, rank_scores_;
};

}  // namespace pagoda
