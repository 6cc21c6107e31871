#pragma once
// The engine: load a model once, then submit requests from any number of threads.
//
//   pagoda::Engine engine({.model_path = "stories260K.gguf"});
//   pagoda::Request r;
//   r.prompt = "Once upon a time";
//   r.sampling.temperature = 0;
//   pagoda::Completion c = engine.submit(r).get();
//
// Inside, four actors (LoRA router, prefill scheduler, decode scheduler, page pool) keep a
// continuous batch full; see docs/architecture.md.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pagoda/chat.h"
#include "pagoda/engine_config.h"
#include "pagoda/request.h"

namespace pagoda {

struct EngineMetrics {
  int64_t queued = 0;           // submitted, not yet admitted
  int64_t running = 0;          // admitted: prefilling or decoding
  int64_t preempted = 0;        // preemptions so far
  int64_t finished = 0;         // requests completed (any reason)
  int64_t kv_pages_used = 0;    // held by running requests
  int64_t kv_pages_cached = 0;  // held by nobody, kept for the prefix cache (evicted on demand)
  int64_t kv_pages_free = 0;    // free + cached + used == total
  int64_t kv_pages_total = 0;
  int64_t prefix_hit_tokens = 0;      // prompt tokens admissions took from the prefix cache
  int64_t prefix_queried_tokens = 0;  // prompt tokens admissions looked up in it
  int64_t generated_tokens = 0;
  double tokens_per_second = 0.0;  // generated tokens over the engine's busy time
  int64_t adapters_resident = 0;
  int64_t adapter_swaps = 0;  // adapters made resident (packed) so far
  double adapter_swap_seconds = 0.0;
  int64_t speculative_proposed = 0;     // guessed tokens verified (Request::speculative)
  int64_t speculative_accepted = 0;     // of them, equal to the token sampled at their row
  double speculative_acceptance = 0.0;  // accepted / proposed; 0 before any guess
  int64_t draft_kv_pages_used = 0;      // the draft model's own KV pool; 0 and 0 without a draft model
  int64_t draft_kv_pages_total = 0;
  // The prefix cache's tiers (EngineConfig::kv_disk_path). prefix_hit_tokens counts hits in
  // either; kv_disk_hit_tokens the part read back from disk.
  int64_t kv_ram_evictions = 0;        // cached pages the RAM pool gave to new work
  int64_t kv_disk_hit_tokens = 0;      // prompt tokens read back from disk instead of computed
  int64_t kv_disk_pages = 0;           // page files in the disk tier now
  int64_t kv_disk_bytes = 0;           // their size
  int64_t kv_disk_read_bytes = 0;      // read back so far
  int64_t kv_disk_written_bytes = 0;   // written so far
  int64_t kv_disk_write_backlog = 0;   // pages waiting to be written
  int64_t kv_disk_writes_skipped = 0;  // pages let go by the pool before their turn to be written
  int64_t kv_disk_evictions = 0;       // files removed to stay within kv_disk_bytes
  int64_t kv_disk_damaged = 0;         // torn, truncated or corrupted files found, dropped and recomputed
};

// One input of Engine::embed: a text (tokenized as Request::prompt is) or token ids used as given.
struct EmbeddingInput {
  EmbeddingInput(std::string text) : text(std::move(text)) {}        // NOLINT: implicit, so {"a", "b"} reads as inputs
  EmbeddingInput(const char* text) : text(text) {}                   // NOLINT
  EmbeddingInput(std::vector<int32_t> ids) : ids(std::move(ids)) {}  // NOLINT
  std::string text;
  std::vector<int32_t> ids;  // used when not empty
};

class Engine {
 public:
  // Loads the model and starts the actors. Throws pagoda::Error for a bad model or config.
  explicit Engine(const EngineConfig& config);
  ~Engine();  // shutdown()
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Validates and queues a request. Throws pagoda::Error, queuing nothing, for an empty
  // prompt, ids outside the vocabulary, prompt + max_new_tokens beyond the context length or
  // the whole KV cache, bad sampling parameters, or an engine that is shut down. Thread-safe.
  RequestHandle submit(Request request);

  // Embeddings of `inputs`, one vector of the model's dim floats each (with Pooling::None, each
  // input's rows of dim floats, one per token, end to end), in order: each input is
  // submitted as a Request with `params` as its Request::embedding, so they are batched with
  // whatever else runs, and this waits for all of them. Throws pagoda::Error, computing
  // nothing, for no inputs or an input submit() would refuse (empty, ids outside the
  // vocabulary, longer than the context length); and when any of them fails or the engine is
  // shut down meanwhile (the others are cancelled). Thread-safe. For cancellation or priority,
  // submit() Requests with Request::embedding yourself.
  std::vector<std::vector<float>> embed(const std::vector<EmbeddingInput>& inputs, const EmbeddingParams& params = {});
  // Relevance scores of `documents` to `query`, one per document in document order, from a
  // reranker (a model whose pooling is Pooling::Rank: bge-reranker, jina-reranker, Qwen3-Reranker).
  // Each pair is fed as rerank_tokens() lays it out, as one embedding request with Pooling::Rank,
  // so the pairs batch like embed()'s inputs. An encoder's scores are raw (logits); a decoder
  // reranker's are P("yes"), the softmax over its head's labels, as llama.cpp gives. Throws
  // pagoda::Error, computing nothing, for no documents, a model that is not a reranker, or a
  // pair longer than the context length; and as embed() does when a pair fails. Thread-safe.
  std::vector<float> rerank(const std::string& query, const std::vector<std::string>& documents);
  // The ids rerank() feeds for one pair, laid out as llama-server does: BOS, the query, EOS,
  // SEP, the document, EOS, where the vocabulary has a token of its own for each (a BERT
  // vocabulary has no EOS: [CLS] query [SEP] document [SEP]; an XLM-R one gives
  // <s> query </s></s> document </s>); or, when the model has a rerank prompt
  // (tokenizer.chat_template.rerank, Qwen3-Reranker's), that prompt with the query and the
  // document in place of {query} and {document}, no BOS or EOS added. Query and document text
  // never become control tokens.
  std::vector<int32_t> rerank_tokens(const std::string& query, const std::string& document) const;
  // Whether rerank()'s scores are probabilities (a decoder reranker's P("yes"), in [0, 1]) rather
  // than raw logits (an encoder reranker's, which TEI's clients pass through a sigmoid).
  bool rerank_probabilities() const;
  // The pooling Pooling::Model stands for with this model (Mean, Cls, Last, None when its GGUF
  // says so, or Rank for a reranker). Throws pagoda::Error for a GGUF pooling_type pagoda does
  // not know, or rank without a rank head.
  Pooling model_pooling() const;
  // Whether the model computes embeddings or scores only (an encoder such as bert): submit()
  // refuses a request to generate text from it.
  bool embedding_only() const;
  // The length of an embedding: the model's hidden size.
  int32_t embedding_size() const;
  // Whether requests may hold images: the engine has a vision projector (EngineConfig::mmproj_path).
  bool takes_images() const;

  EngineMetrics metrics() const;

  // Why the engine can no longer serve its model, or nothing while it can: the mapped model
  // file was truncated under it (EngineConfig::use_mmap), so its weights are gone. Every
  // request then fails with this text; a new Engine reloads the file. For health checks.
  std::optional<std::string> model_lost() const;

  // Registers a LoRA adapter (llama.cpp's GGUF adapter format) under `name`, with the user
  // scale multiplying alpha / rank. Requests name it in Request::adapter. Throws pagoda::Error
  // for a bad file, one that does not fit the model, or a name already loaded; the engine
  // keeps serving. Thread-safe; may be called while requests run.
  void load_adapter(const std::string& name, const std::string& path, float scale = 1.0f);

  // Unregisters an adapter. Requests already running on it finish on it (they hold its
  // weights); requests still waiting for it fail with an error naming it. Throws
  // pagoda::Error if no adapter has that name.
  void unload_adapter(const std::string& name);

  // Stops accepting requests, cancels those in flight (every future resolves) and stops the
  // actors. Idempotent.
  void shutdown();

  // The model's tokenizer and shape, for applications that build prompts themselves.
  // parse_special: turn control tokens written in the text ("<|im_start|>", "<|eot_id|>")
  // into their ids, as a chat template needs; without it they stay ordinary text, as user
  // text should. User-defined tokens ("<think>") are matched whole either way (llama.cpp).
  std::vector<int32_t> tokenize(const std::string& text, bool add_bos, bool parse_special = false) const;
  std::string detokenize(const std::vector<int32_t>& ids) const;
  // The bytes token `id` stands for, as it reads inside a text (a leading space kept; a byte
  // token's one byte, which may be part of a UTF-8 character). Throws pagoda::Error if out of range.
  std::string token_text(int32_t id) const;
  int32_t context_length() const;
  int32_t vocab_size() const;
  int32_t eos_id() const;
  // The end-of-generation tokens, sorted: EOS, the vocabulary's EOT/EOM ids and the tokens
  // llama.cpp treats as ending a turn by their text ("<|eot_id|>", "<|im_end|>", "<|eom_id|>",
  // "<|endoftext|>", "<end_of_turn>", ...). Generation stops at any of them
  // (FinishReason::Eos) unless Request::ignore_eos.
  std::vector<int32_t> eog_ids() const;
  // The chat template in use: EngineConfig::chat_template, or else GGUF tokenizer.chat_template,
  // when the model has one.
  std::optional<std::string> chat_template() const;
  // Whether a prompt starts with BOS (GGUF tokenizer.ggml.add_bos_token; false for Qwen):
  // tokenize a prompt with tokenize(text, add_bos()), as Request::prompt is. tokenize(text, true)
  // puts BOS first whatever the model says.
  bool add_bos() const;
  // The control and user-defined tokens, as the vocabulary spells them ("<|im_start|>"), for
  // applications that lay out chat templates themselves.
  struct SpecialToken {
    std::string piece;
    int32_t id;
  };
  std::vector<SpecialToken> special_tokens() const;

  // A conversation as a prompt in the model's chat format, ending, with add_generation_prompt,
  // where the assistant's reply begins, and stop at chat_format()'s end of turn. The text alone
  // does not say which control tokens a user typed: tokenize render_chat()'s ChatPrompt instead
  // (tokenize(text, add_bos(), true) parses those too).
  //
  // When the model has a Jinja chat template (EngineConfig::chat_template, or else its GGUF
  // tokenizer.chat_template) it is rendered as Python's jinja2 renders it for transformers'
  // apply_chat_template: with `messages`, `tools` (options.tools, when given),
  // `add_generation_prompt`, `bos_token` and `eos_token` as the vocabulary spells them, and
  // options.kwargs' members; when the tokenizer adds a BOS itself, a BOS the template wrote at
  // the front is left out (as llama.cpp does), so the prompt tokenizes to one. A template that raises (raise_exception,
  // a type error) or runs away is a pagoda::Error naming its line, as is malformed tools/kwargs JSON. Without a
  // template, or with one pagoda could not parse at load (a warning on stderr names the line),
  // the built-in layout of chat_format()'s family is used, which refuses roles other than
  // system, user, assistant (or developer, read as system) with a pagoda::Error.
  std::string apply_chat_template(const std::vector<ChatMessage>& messages, const ChatTemplateOptions& options) const;
  std::string apply_chat_template(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true) const;
  // The prompt apply_chat_template renders, with the byte ranges the template copied from the
  // messages, options.tools and options.kwargs as its data spans (none with
  // options.special_in_content). Tokenize it with tokenize(prompt, add_bos()): a user who types
  // "<|im_end|>" or "</s>" into a message gets those characters as text, not a control token
  // that ends the turn or forges another; the template's own control tokens are parsed as
  // tokenize(text, add_bos(), true) parses them, and a prompt whose data holds no control-token
  // text gets exactly the ids of tokenize(text, add_bos(), true).
  ChatPrompt render_chat(const std::vector<ChatMessage>& messages, const ChatTemplateOptions& options) const;
  // Token ids of a rendered chat prompt (BOS first when add_bos): control tokens parsed outside
  // its data spans only; user-defined tokens ("<think>") matched whole everywhere, as by
  // tokenize(text, add_bos, true).
  std::vector<int32_t> tokenize(const ChatPrompt& prompt, bool add_bos) const;
  // The same for a prompt whose text holds `image_marker` where images go (chat content with
  // images, each rendered as the marker): the text between markers tokenized piece by piece,
  // and `image_positions` gets, for each marker in order, the index of the token it precedes
  // (RequestImage::position). The markers themselves become no tokens.
  std::vector<int32_t> tokenize(const ChatPrompt& prompt, bool add_bos, std::string_view image_marker,
                                std::vector<int32_t>& image_positions) const;
  ChatFormat chat_format() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagoda
