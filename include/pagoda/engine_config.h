#pragma once
// How an Engine is set up: the model, the compute threads, the KV cache, the step's budgets,
// preemption and LoRA residency. A header of its own so the actors that read it need not see
// the Engine.

#include <cstddef>
#include <cstdint>
#include <string>

#include "pagoda/kv_cache_type.h"
#include "pagoda/speculative.h"

namespace pagoda {

enum class PreemptionMode {
  Recompute,  // drop the victim's KV pages and prefill it again later
  Swap,       // copy its pages to host memory and bring them back later
};

struct EngineConfig {
  std::string model_path;      // GGUF, or llama2.c checkpoint
  std::string tokenizer_path;  // llama2.c only: its tokenizer.bin
  // A vision projector (llama.cpp's mmproj GGUF: a ViT and its projector) for the model, so
  // requests may hold images (Request::images). Empty: text only.
  std::string mmproj_path;
  // A Jinja chat template that replaces the model's GGUF tokenizer.chat_template; empty: the
  // model's own.
  std::string chat_template;
  // Map the model file and read the weights in place (pages shared with the OS's file cache).
  // Off (llama.cpp's --no-mmap): read the whole file into the engine's own memory at load, so
  // nothing done to the file afterwards matters. With it on, a file truncated under the engine
  // fails every request from then on ("model file ... changed after it was mapped"); the
  // process survives, and a new Engine reloads it.
  bool use_mmap = true;
  int threads = 0;                      // compute threads; 0 = all cores
  int32_t kv_pages = 0;                 // KV cache size in pages; 0 = use kv_bytes
  size_t kv_bytes = size_t(512) << 20;  // KV cache budget when kv_pages is 0
  int32_t tokens_per_page = 16;
  KvCacheType kv_cache_type = KvCacheType::F16;  // q8_0 needs head_dim % 32 == 0
  int32_t max_tokens_per_step = 512;             // token budget of one forward step
  int32_t max_entries_per_step = 256;            // sequences in one step
  int32_t max_running = 256;                     // sequences admitted at once
  int32_t prefill_chunk = 256;                   // prefill tokens of one sequence in one step
  PreemptionMode preemption = PreemptionMode::Recompute;
  int32_t max_resident_adapters = 8;  // LoRA adapters packed for the kernels at once
  int32_t adapter_run_cap = 32;       // same-adapter requests the router forwards in one run
  // Requests on different adapters (and the base model) share a step. Off: a step holds one
  // adapter's requests only, taking turns (the coalesce-only baseline of the benchmarks).
  bool mixed_adapter_batches = true;
  // Automatic prefix caching: full KV pages are kept, named by a hash of their prefix, after
  // their requests finish, and a request whose prompt starts the same way takes them instead
  // of computing them again. Outputs are bit-identical with and without it.
  bool prefix_caching = true;
  // Make the whole KV cache resident at start instead of page by page as it is first written:
  // the process claims its memory up front (as a server should: it fails at start, not under
  // load), and its resident size does not creep up while the prefix cache, which keeps freed
  // pages and takes never-used ones first, spreads over the arena. Off: engines start at once.
  bool kv_prefault = false;
  // A second tier of the prefix cache on disk (llama.cpp's slot files and LMCache's disk
  // backend, automatic): every full KV page the prefix cache names is also written, off the
  // step loop, to a file in this directory, and an admission whose prefix left the RAM pool
  // (evicted, or the process restarted) reads its pages back instead of computing them again.
  // Files are named by the model file's contents, the KV type, the kernels' ISA and the prefix
  // hash chain, so another model, type or tokenizer never matches; each carries a checksum, and
  // a torn or corrupted one is dropped and its pages recomputed. Empty: no disk tier. Pages of
  // requests on a LoRA adapter stay in RAM only.
  std::string kv_disk_path;
  // The files' total size (least recently used dropped first); the directory's files of other
  // models count too.
  size_t kv_disk_bytes = size_t(8) << 30;
  // Publishes the prefix cache's page events (vLLM's BlockStored / BlockRemoved /
  // AllBlocksCleared, msgpack over a ZeroMQ PUB socket) at this endpoint, e.g. "tcp://*:5557",
  // so a KV-aware router (llm-d, Dynamo) can send requests where their prefix is. Empty: none.
  std::string kv_events_endpoint;
  // A ZeroMQ ROUTER endpoint that replays recent event batches from a sequence number (vLLM's
  // replay socket), e.g. "tcp://*:5558"; empty: no replay.
  std::string kv_events_replay_endpoint;
  // The topic every event message is sent under (vLLM's default: empty).
  std::string kv_events_topic;
  // Speculative decoding for requests that do not choose (Request::speculative). Outputs are
  // bit-identical with and without it.
  SpeculativeParams speculative;
  // Speculation steps aside in steps with more decoding sequences than this: it trades compute
  // for latency, which pays while a step is bound by reading the weights, not in a full batch.
  int32_t speculative_max_batch = 8;
  // A smaller GGUF with the same vocabulary (llama-server's --model-draft), for requests whose
  // SpeculativeParams::mode is Draft; empty: none (such requests are refused). It runs beside
  // the model with its own KV pages in a pool of its own, which only the decode scheduler
  // touches and which has no prefix cache: draft_kv_pages pages, or 0 for as many token
  // positions as the model's cache holds (the draft's layout decides their bytes).
  std::string draft_model_path;
  int32_t draft_kv_pages = 0;
};

}  // namespace pagoda
