#pragma once
// The decode scheduler actor: owns the running sequences and the step loop. Each step it
// carries out the plan of engine/scheduling/step_planner.h — every decoding sequence first,
// then prefill chunks until the token budget or the entry cap (a chunk may be cut to fit) —
// then runs the forward pass, samples, streams, finishes and frees. Speculating decodes get
// their guesses from their proposer within what the planner leaves them, the draft model's for
// all of them at once (`draft`, null without one). When the page pool runs dry it preempts the
// sequences the planner names, the most recently admitted (recompute or swap). With nothing to
// run it blocks on its mailbox. Pages a step fills are named for the prefix cache before
// anything else can release them. With a vision encoder (set_vision), a step first encodes the
// images whose rows its prefill chunks feed for the first time, and feeds those rows in their
// positions (BatchEntry::embeddings).

#include <optional>
#include <vector>

#include "actors/actor.h"
#include "actors/messages.h"
#include "actors/page_pool_actor.h"
#include "engine/metrics/metrics_board.h"
#include "engine/forward/model_runner.h"
#include "engine/forward/vision_encoder.h"
#include "engine/request/image_row_cache.h"
#include "engine/scheduling/step_planner.h"
#include "engine/speculation/draft_proposer.h"
#include "pagoda/engine_config.h"

namespace pagoda {

class DecodeScheduler : public Actor<DecodeMessage> {
 public:
  DecodeScheduler(std::shared_ptr<Mailbox<DecodeMessage>> mailbox, ModelRunner& runner, KvView kv, PagePoolActor& pool,
                  std::shared_ptr<Mailbox<PrefillMessage>> prefill, const EngineConfig& config, MetricsBoard& metrics,
                  speculation::DraftProposer* draft = nullptr);

  // Cancels what is left in the mailbox after the actor stopped (shutdown).
  void drain();
  // The encoder of the requests' images (null: text only), before start(); it runs in the
  // runner's arena, on this actor's thread.
  void set_vision(VisionEncoder* vision) { vision_ = vision; }

 private:
  struct Planned {
    Sequence* seq;
    int32_t n_tokens;
  };

  void run() override;
  void handle(DecodeMessage message) override;
  void step();
  // Plans the step with planner_, asking the proposers for guesses and the pool for pages,
  // preempting until the pages come; false with nothing to run.
  bool plan(std::vector<Planned>& planned);
  // Asks the proposers for the guesses plan_ leaves room for, and writes down what came.
  void propose_guesses();
  // Encodes the images whose rows this step's chunks feed and that have none yet (kept ones from
  // image_rows_, the others in one encoder call), and lists every sequence's encoded rows in its
  // image_runs. A sequence whose image cannot be encoded finishes with the error and leaves the plan.
  void encode_images(std::vector<Planned>& planned);
  void preempt(SequencePtr victim);
  void process_outputs(const std::vector<Planned>& planned, const std::vector<float>& logits);
  // An embedding's chunk is in: n_cached past it, its rows of hidden_ (from `hidden_row` on)
  // given to its pooler, its filled pages collected. Returns the next entry's first hidden row.
  size_t pool_rows(Sequence& seq, const BatchEntry& entry, size_t hidden_row);
  // After a decode's rows were verified: n_cached past the accepted guesses, the pages beyond
  // given back, the draft length and the counters told.
  void keep_accepted(Sequence& seq);
  // Adds the pages `seq` has filled to filled_, for the prefix cache.
  void collect_filled(Sequence& seq);
  void append_token(Sequence& seq, int32_t token, std::optional<TokenLogprobs> logprobs);
  void retire(Sequence& seq, FinishReason reason, std::string error = {});
  void remove_finished();

  ModelRunner& runner_;
  KvView kv_;
  PagePoolActor& pool_;
  std::shared_ptr<Mailbox<PrefillMessage>> prefill_;
  EngineConfig config_;
  MetricsBoard& metrics_;
  speculation::DraftProposer* draft_;
  VisionEncoder* vision_ = nullptr;
  ImageRowCache image_rows_;                             // recent images' encoder rows, by pixel hash
  std::vector<speculation::DraftingSequence> drafting_;  // this step's decodes that ask the draft model for guesses
  const Tokenizer& tokenizer_;                           // its end-of-generation set ends sequences

  std::vector<SequencePtr> running_;  // in admission order
  int32_t slots_to_return_ = 0;
  size_t turn_ = 0;  // whose adapter's turn it is, without mixed-adapter batches
  scheduling::StepPlanner planner_;
  std::vector<scheduling::SequenceView> views_;  // running_ as the planner sees it
  scheduling::StepPlan plan_;                    // reused so steps do not allocate
  std::vector<Planned> planned_;                 // this step's entries; reused so steps do not allocate
  struct Sampled {
    Sequence* seq;
    size_t row = 0;           // its first row of the step's logits
    bool decode = false;      // the entry was a decode (with or without guesses), not a prompt's end
    bool score_only = false;  // max_new_tokens 0: the prompt was scored, nothing more
  };
  // The sequences whose next tokens this step's logits give; what was sampled is in each
  // one's Sequence::sampled (Sequence::sample).
  std::vector<Sampled> sampling_;
  struct Scored {
    Sequence* seq;
    int32_t index;  // into seq->prompt_logprobs_out: prompt token index + 1's
    size_t row;
  };
  std::vector<Scored> scoring_;    // the prompt tokens this step's logits score
  std::vector<NamedPage> filled_;  // pages this step filled, for the prefix cache
  Batch batch_;
  std::vector<float> logits_;
  std::vector<float> hidden_;        // the embedding entries' rows of final hidden states
  std::vector<Sequence*> embedded_;  // embeddings whose prompt this step completed
  std::vector<float> rank_rows_;     // score_rank_pairs' rows of embedded_, and their scores
  std::vector<float> rank_scores_;
};

}  // namespace pagoda
