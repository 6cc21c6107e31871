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
#include <vector>

#include "pagoda/request.h"

namespace pagoda {

enum class PreemptionMode {
  Recompute,  // drop the victim's KV pages and prefill it again later
  Swap,       // copy its pages to host memory and bring them back later
};

struct EngineConfig {
  std::string model_path;               // GGUF, or llama2.c checkpoint
  std::string tokenizer_path;           // llama2.c only: its tokenizer.bin
  int threads = 0;                      // compute threads; 0 = all cores
  int32_t kv_pages = 0;                 // KV cache size in pages; 0 = use kv_bytes
  size_t kv_bytes = size_t(512) << 20;  // KV cache budget when kv_pages is 0
  int32_t tokens_per_page = 16;
  int32_t max_tokens_per_step = 512;    // token budget of one forward step
  int32_t max_entries_per_step = 256;   // sequences in one step
  int32_t max_running = 256;            // sequences admitted at once
  int32_t prefill_chunk = 256;          // prefill tokens of one sequence in one step
  PreemptionMode preemption = PreemptionMode::Recompute;
  int32_t max_resident_adapters = 8;    // LoRA adapters packed for the kernels at once
  int32_t adapter_run_cap = 32;         // same-adapter requests the router forwards in one run
  // Requests on different adapters (and the base model) share a step. Off: a step holds one
  // adapter's requests only, taking turns (the coalesce-only baseline of the benchmarks).
  bool mixed_adapter_batches = true;
};

struct EngineMetrics {
  int64_t queued = 0;      // submitted, not yet admitted
  int64_t running = 0;     // admitted: prefilling or decoding
  int64_t preempted = 0;   // preemptions so far
  int64_t finished = 0;    // requests completed (any reason)
  int64_t kv_pages_used = 0;
  int64_t kv_pages_free = 0;
  int64_t kv_pages_total = 0;
  int64_t generated_tokens = 0;
  double tokens_per_second = 0.0;  // generated tokens over the engine's busy time
  int64_t adapters_resident = 0;
  int64_t adapter_swaps = 0;       // adapters made resident (packed) so far
  double adapter_swap_seconds = 0.0;
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

  EngineMetrics metrics() const;

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
  std::vector<int32_t> tokenize(const std::string& text, bool add_bos) const;
  std::string detokenize(const std::vector<int32_t>& ids) const;
  int32_t context_length() const;
  int32_t vocab_size() const;
  int32_t eos_id() const;
  // GGUF tokenizer.chat_template, when the model has one.
  std::optional<std::string> chat_template() const;
  // Whether tokenize(text, true) puts BOS first (GGUF tokenizer.ggml.add_bos_token).
  bool add_bos() const;
  // The control and user-defined tokens, as the vocabulary spells them ("<|im_start|>"), for
  // applications that lay out chat templates themselves.
  struct SpecialToken {
    std::string piece;
    int32_t id;
  };
  std::vector<SpecialToken> special_tokens() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagoda
