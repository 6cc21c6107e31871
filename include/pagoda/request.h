#pragma once
// What an application submits and what it gets back.

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pagoda/sampling.h"
#include "pagoda/speculative.h"

namespace pagoda {

// A token's log-probability under the model: the log-softmax of the step's raw logits, before
// logit_bias, penalties and temperature (vLLM's default), so it is the same whatever sampling
// the request asked for.
struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0.0f;
};

// One generated token's log-probability and the `Request::logprobs` most likely tokens of its
// step, most likely first (ties: the lower id first).
struct TokenLogprobs {
  float logprob = 0.0f;
  std::vector<TokenLogprob> top;
};

// One step of a request's output stream: the token and the text it completed (possibly empty
// when a UTF-8 character spans tokens, or while text is held back because it may be the start
// of a stop string).
struct StreamEvent {
  int32_t token = -1;  // -1 for the last event when it only releases held-back text
  std::string text;
  std::optional<TokenLogprobs> logprobs;  // for a token, when Request::logprobs >= 0
};

// How an embedding request makes one vector of its prompt's final hidden states (each the
// model's last hidden state after the output norm: llama.cpp's `result_norm`), or keeps them all.
enum class Pooling {
  Model,  // the model's GGUF ARCH.pooling_type (none, mean, cls, last or rank); last when it has none
  Mean,   // the mean over every prompt position
  Cls,    // the first position's (BERT's [CLS]; for a decoder model, what the first token saw alone)
  Last,   // the last position's, which has seen the whole prompt (llama-server and vLLM for decoders)
  Rank,   // a reranker's relevance score: its rank head on the first position (an encoder's) or the last
          // (a decoder's); one float, never normalized
  None,   // no pooling: every position's row, in order (prompt length × dim floats), each normalized alone
};
const char* pooling_name(Pooling pooling);

// Request::embedding: the request computes its prompt and nothing more.
struct EmbeddingParams {
  Pooling pooling = Pooling::Model;
  bool normalize = true;  // scale to unit L2 length, as OpenAI's embeddings are
  // An input longer than the context length is cut to fit instead of refused (TEI's
  // `truncate`): its first tokens are kept, and its last one too when that is a control token
  // (BERT's [SEP], an EOS the vocabulary appends), so the input still ends as the model expects.
  bool truncate = false;
};

// An image of a request's prompt (needs an engine with a vision projector, EngineConfig::
// mmproj_path). It is decoded, resized and normalized as the model family's own processor does,
// encoded into rows of the model's embedding width, and those rows stand in the prompt where it
// goes, between the family's image tokens (Gemma 3's <start_of_image> ... <end_of_image>).
struct RequestImage {
  std::string data;  // the image file's bytes: PNG, JPEG or WebP
  // Where it goes in Request::prompt_ids: before the token at this index (prompt_ids.size():
  // after the last). -1 with a text prompt: at the next Request::image_marker.
  int32_t position = -1;
};

struct Request {
  std::string prompt;               // text, tokenized with the model's tokenizer (BOS added
                                    // when the vocabulary says so), or
  std::vector<int32_t> prompt_ids;  // token ids, used as given when not empty
  // The prompt's images, in order. A text prompt holds image_marker once for each, where it goes
  // (the text between markers is tokenized as `prompt` is, each piece on its own); with
  // prompt_ids each gives its position. A caller that puts other people's text into the prompt
  // picks a marker they cannot type (pagoda-server draws a random one per request).
  std::vector<RequestImage> images;
  std::string image_marker = "<__image__>";
  // Tokenize control tokens written in `prompt` ("<|im_start|>") as their ids, for a prompt
  // laid out by a chat template; off, they are ordinary text (the right thing for user text).
  bool parse_special = false;
  SamplingParams sampling;
  int32_t max_new_tokens = 256;         // at least 1 (0 with prompt_logprobs)
  std::vector<int32_t> stop_token_ids;  // besides the end-of-generation tokens
  std::vector<std::string> stop_strings;
  // Log-probabilities of the generated tokens: -1 none; 0 each token's own; k (at most 20)
  // also the k most likely tokens of each step.
  int32_t logprobs = -1;
  // The same for the prompt's tokens (each but the first, given those before it): scoring a
  // text. Such a request does not read the prefix cache (cached positions have no logits) and
  // may set max_new_tokens = 0 to score the prompt only.
  int32_t prompt_logprobs = -1;
  // Constrained decoding: the output must be text of this grammar, in llama.cpp's GBNF syntax
  // (start rule `root`), or valid against this JSON Schema (compiled to such a grammar); at
  // most one of the two. Tokens the grammar cannot continue with are never drawn, and the
  // end-of-generation and stop tokens only once the text is complete, so an output that ends by
  // EOS or a stop token is a whole sentence of the grammar (one cut by max_new_tokens may
  // not be). A request's mask depends on its own output only, so batch invariance holds.
  // Malformed grammars and unsupported schemas are refused at submit.
  std::string grammar;
  std::string json_schema;
  // Lazy constraint: with triggers, the output is free until one of these strings appears in
  // it; from the trigger's first byte on, the output must match the grammar (so the grammar
  // starts with the trigger's text). Tool calls use this: a model may answer in prose or begin
  // a call, and only a call is constrained.
  std::vector<std::string> grammar_triggers;
  bool ignore_eos = false;  // go on past end-of-generation tokens (Engine::eog_ids())
  std::string adapter;      // LoRA adapter name; empty = the base model
  int32_t priority = 0;     // higher is admitted first
  // Called on the engine's scheduler thread for every token as it is made: keep it short.
  std::function<void(const StreamEvent&)> on_token;
  bool stream = false;  // also queue tokens for RequestHandle::next_token()
  // Share KV pages with earlier requests that had the same prefix (when the engine's
  // prefix_caching is on). Outputs are bit-identical either way; false opts this request out
  // of reading the cache and of adding its pages to it.
  bool prefix_cache = true;
  // Speculative decoding for this request; nullopt: EngineConfig::speculative. The output is
  // the same with and without it, bit for bit (pagoda/speculative.h).
  std::optional<SpeculativeParams> speculative;
  // Embed the prompt instead of generating: a prefill-only request, scheduled, batched, chunked
  // and preempted like any other, whose Completion::embedding is its pooled final hidden state.
  // Sampling, stops and max_new_tokens are ignored; the prompt alone must fit the context.
  // logprobs, prompt_logprobs and a grammar are refused. Mean, cls and none pooling need every
  // position's row, so they do not read the prefix cache; last pooling (a decoder's rank too) does.
  std::optional<EmbeddingParams> embedding;
};

enum class FinishReason { Eos, Length, Stop, Cancelled, Error };
const char* finish_reason_name(FinishReason reason);

struct Completion {
  std::vector<int32_t> token_ids;       // generated ids, ending with the stop or EOS id if one ended it
  std::string text;                     // their text, without a stop token, cut before a stop string
  std::vector<TokenLogprobs> logprobs;  // one per token_ids entry, with Request::logprobs >= 0
  // Entry i is prompt token i + 1's, with Request::prompt_logprobs >= 0.
  std::vector<TokenLogprobs> prompt_logprobs;
  // With Request::embedding: the model's dim floats, or with Pooling::None prompt length × dim
  // (one row per position, in order), or a reranker's one score (empty if it did not finish).
  std::vector<float> embedding;
  FinishReason finish_reason = FinishReason::Length;  // an embedding that was made: Length
  std::string error;                                  // for FinishReason::Error
  std::string stop_string;  // the Request::stop_strings entry that ended the output, if one did
  int32_t prompt_tokens = 0;
  double time_to_first_token_s = 0.0;
  double time_per_output_token_s = 0.0;  // mean gap between tokens after the first
  int32_t preemptions = 0;
};

namespace detail {
struct RequestState;
}

// The caller's side of a submitted request. Movable; dropping it does not cancel the request.
class RequestHandle {
 public:
  RequestHandle(std::shared_ptr<detail::RequestState> state, std::future<Completion> future);
  RequestHandle(RequestHandle&&) noexcept;
  RequestHandle& operator=(RequestHandle&&) noexcept;
  ~RequestHandle();

  uint64_t id() const;
  std::future<Completion>& future() { return future_; }
  Completion get() { return future_.get(); }

  // Asks the engine to stop this request; its future resolves with FinishReason::Cancelled
  // (unless it had already finished). Safe from any thread, at any moment, more than once.
  void cancel();

  // With Request::stream: blocks for the next token; nullopt once the request has finished.
  std::optional<StreamEvent> next_token();
  // The same, waiting at most `timeout`: nullopt when nothing came in time or the stream has
  // ended (stream_ended() tells which), so a caller can look at other things between tokens.
  std::optional<StreamEvent> next_token(std::chrono::milliseconds timeout);
  bool stream_ended() const;

 private:
  std::shared_ptr<detail::RequestState> state_;
  std::future<Completion> future_;
};

}  // namespace pagoda
