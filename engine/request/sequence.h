#pragma once
// Everything the engine knows about one request while it runs: its tokens, how many are in
// the KV cache, its block table, sampler and output text. A Sequence is owned by exactly one
// actor at a time and moves between them inside messages (std::unique_ptr).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "engine/forward/batch.h"
#include "engine/grammar/grammar_constraint.h"
#include "engine/image/image.h"
#include "engine/kv/block_table.h"
#include "engine/kv/prefix_cache.h"
#include "engine/lora/lora_weights.h"
#include "engine/request/embedding_pooler.h"
#include "engine/request/output_text.h"
#include "engine/request/request_state.h"
#include "engine/sampling/next_token.h"
#include "engine/sampling/sampler.h"
#include "engine/speculation/speculation_state.h"

namespace pagoda {

enum class SequenceStatus { Waiting, Prefilling, Decoding, Finished, Preempted };

using Clock = std::chrono::steady_clock;

// An image of a sequence's prompt: the positions its rows take, its pixels until they are
// encoded, and then its rows (the decode scheduler encodes it in the step that first feeds one
// of its positions; one a prefix-cache hit covers whole is never fed, and keeps its pixels).
struct SequenceImage {
  int32_t position = 0;   // the first prompt position its rows stand in
  int32_t tokens = 0;     // its rows
  int32_t grid_rows = 0;  // its rows down the image: tokens = grid_rows × grid_cols, in raster order
  int32_t grid_cols = 0;
  // Of its pixel planes, seeded with the projector's VisionModel::fingerprint: equal images
  // share their rows, and the prefix cache's keys of the pages holding them (PrefixImage).
  uint64_t hash = 0;
  // What encoding it costs a step, in the language model's tokens (the encoder's FLOPs over a
  // token's): the step planner counts it in the budget of the chunk that first feeds the image.
  int32_t cost_tokens = 0;
  // Its rows attend to each other both ways (Gemma 3's images; EmbeddingRun::bidirectional), so
  // the step planner feeds them all in one step.
  bool bidirectional = false;
  std::shared_ptr<const PixelPlanes> pixels;
  std::shared_ptr<const std::vector<float>> rows;  // tokens × the model's dim, once encoded
};

struct Sequence {
  Sequence(std::shared_ptr<detail::RequestState> state, const Request& request, std::vector<int32_t> prompt,
           const Tokenizer& tokenizer, const KvLayout& kv_layout)
      : state(std::move(state)),
        max_new_tokens(request.max_new_tokens),
        stop_token_ids(request.stop_token_ids),
        logprobs(request.logprobs),
        prompt_logprobs(request.prompt_logprobs),
        ignore_eos(request.ignore_eos),
        prefix_cache(request.prefix_cache && request.prompt_logprobs < 0),
        priority(request.priority),
        adapter(request.adapter),
        on_token(request.on_token),
        tokens(std::move(prompt)),
        prompt_len(int32_t(tokens.size())),
        table(kv_layout),
        sampler(request.sampling),
        spec(request.speculative.value_or(SpeculativeParams{})),
        output(tokenizer, request.stop_strings) {
    if (request.sampling.min_tokens > 0) {
      ending_ids = stop_token_ids;
      if (!ignore_eos) ending_ids.insert(ending_ids.end(), tokenizer.eog_ids().begin(), tokenizer.eog_ids().end());
    }
  }

  uint64_t id() const { return state->id; }
  bool cancel_requested() const { return state->cancel_requested.load(std::memory_order_relaxed); }
  int32_t generated() const { return int32_t(tokens.size()) - prompt_len; }
  // Tokens not yet in the KV cache: the rest of the prompt, or the last sampled token.
  int32_t pending() const { return int32_t(tokens.size()) - n_cached; }

  // Hands a token (or held-back text, token -1) to the callback and the pull stream. A callback
  // that throws is not called again and its message is kept in callback_error: that request
  // ends with an error, and nothing else in the step is affected.
  void emit(const StreamEvent& event);
  // Resolves the request's future (flushing held-back text to the stream first). The caller
  // still owns the pages.
  void finish(FinishReason reason, std::string error = {});
  // Samples this step's tokens from its rows of `logits` (`vocab` wide): one row for a plain
  // decode, one per guess plus one when it speculates (speculation/verifier.h), appending them
  // to `tokens` and counting them in `sampled`.
  void sample(std::span<const float> logits, size_t vocab);

  std::shared_ptr<detail::RequestState> state;
  int32_t max_new_tokens;
  std::vector<int32_t> stop_token_ids;
  int32_t logprobs;         // Request::logprobs
  int32_t prompt_logprobs;  // Request::prompt_logprobs
  bool ignore_eos;
  std::vector<int32_t> ending_ids;  // what the sampler bans before min_tokens (empty without it)
  bool prefix_cache;       // share cached prefix pages and offer its own (the request's and the engine's choice)
  bool disk_reads = true;  // an admission may read its hit from the disk tier; off after a bad file
  int32_t priority;
  std::string adapter;
  std::function<void(const StreamEvent&)> on_token;
  std::string callback_error;               // what on_token threw, if it did
  std::shared_ptr<const LoraWeights> lora;  // set by the router: the resident adapter
  std::function<void()> on_adapter_done;    // set by the router: tells it this request is done
  uint64_t adapter_generation = 0;          // set by the router: which load of the adapter

  std::vector<int32_t> tokens;           // the prompt (placeholder ids where images go), then what was generated
  std::vector<SequenceImage> images;     // Request::images, by position
  std::vector<EmbeddingRun> image_runs;  // the encoded images' rows, for BatchEntry::embeddings
  std::vector<ImageGrid> image_grids;    // every image's grid, for BatchEntry::image_grids
  int32_t prompt_len;
  int32_t n_cached = 0;  // positions whose K/V are in the cache
  BlockTable table;      // a page list per KV group; sliding groups' old pages are holes
  PrefixHashes prefix;   // its full blocks' prefix-cache hashes
  Sampler sampler;
  speculation::SpeculationState spec;                   // Request::speculative (or the engine's default)
  SampledTokens sampled;                                // what this step's sample() appended
  std::unique_ptr<grammar::GrammarConstraint> grammar;  // Request::grammar or json_schema, compiled
  OutputText output;
  std::vector<TokenLogprobs> logprobs_out;         // one per generated token, with logprobs >= 0
  std::vector<TokenLogprobs> prompt_logprobs_out;  // entry i: prompt token i + 1's
  // Request::embedding (set by the engine, its pooling resolved): the prompt is computed, its
  // rows pooled, and the request finishes when the prompt is in, with Completion::embedding.
  std::optional<EmbeddingPooler> embedding;

  SequenceStatus status = SequenceStatus::Waiting;
  uint64_t admit_order = 0;  // later admissions are preempted first
  bool requeued = false;     // preempted and waiting to come back, ahead of new work
  std::vector<std::byte>
      swapped_kv;  // host copy of its live pages (raw bytes, BlockTable::live_pages) while swapped out
  int32_t preemptions = 0;

  Clock::time_point submitted = Clock::now();
  Clock::time_point first_token{};
  Clock::time_point last_token{};
};

using SequencePtr = std::unique_ptr<Sequence>;

}  // namespace pagoda
