#pragma once
// The batched forward pass over a paged KV cache: one call runs one step for a whole
// continuous batch (prefill chunks and decodes together) and returns logits only for the rows
// that need them.
//
// Batch invariance: a sequence's logits are bit-for-bit the same whatever else is in the
// batch, however its prompt was chunked, and whatever the thread count, because every kernel
// computes each row (and each query token's attention) with a fixed reduction order.

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <vector>

#include <tbb/task_arena.h>

#include "engine/forward/batch.h"
#include "engine/forward/moe_ffn.h"
#include "engine/model/model.h"
#include "kernels/gemm.h"
#include "kernels/lora_sgmv.h"
#include "kernels/quant/weight_matrix.h"
#include "kernels/rope.h"

namespace pagoda {

class ModelRunner {
 public:
  // Builds weight matrices over the model's file-encoded weights (F32 ones are packed).
  // `threads` bounds the task arena the step runs in (0 = all cores). The Model (and its
  // mapping) must outlive the runner. A mapped file's pages that repacked matrices replace are
  // dropped (they fault in again if read); with `sole_reader`, the caller promises that nothing
  // but this runner reads the model's weights from now on, so a file read into memory
  // (--no-mmap) has those bytes freed as well, and is not resident twice either.
  // Throws pagoda::Error for an encoder (bert): EncoderRunner runs those.
  ModelRunner(const Model& model, int threads = 0, bool sole_reader = false);

  // Runs one step: writes the new tokens' keys and values into their pages in `kv` and fills
  // `logits` with one row of vocab_size floats for each entry with needs_logits (one row per
  // new token for an entry with all_logits), in entry order. Throws pagoda::Error on an inconsistent batch (positions
  // beyond the context or the block table, token ids outside the vocabulary), and when the model's weights were lost
  // before or during the step (weights_lost): the logits and KV written are then garbage.
  void forward(const Batch& batch, const KvView& kv, std::vector<float>& logits);
  // The same, and `hidden` gets one row of dim floats, the final hidden state after the output
  // norm (llama.cpp's result_norm), for each row a `hidden` entry asks for, in entry order; those
  // rows are left out of `logits`. Each row is normed on its own, so it is batch invariant too.
  void forward(const Batch& batch, const KvView& kv, std::vector<float>& logits, std::vector<float>& hidden);

  // A decoder reranker's scores (Qwen3-Reranker, weights.rank_output): for each of `n` rows of
  // `hidden` (dim floats each, a prompt's last position), the softmax over the rank head's
  // outputs, element 0 (P("yes")), as llama.cpp scores qwen3; a one-label head gives its output
  // itself. Each row on its own, so batch invariant. Throws pagoda::Error without a rank head.
  void rank_scores(const float* rows, int32_t n, float* scores);

  const ModelConfig& config() const { return model_.config; }
  const Model& model() const { return model_; }
  int threads() const { return arena_.max_concurrency(); }
  // The compute threads, for per-sequence work beside the forward pass (sampling).
  tbb::task_arena& arena() { return arena_; }

  // Floating-point operations of one step over `batch` (matmuls and attention), for benchmarks.
  double flops(const Batch& batch) const;
  // Weight bytes the last forward read, as the file encodes them: every dense matrix once and,
  // of a mixture-of-experts layer, only the experts some row chose (MoeFfn::bytes_read). The
  // roofline of a step is the read bandwidth over this; for benchmarks.
  double last_step_weight_bytes() const { return last_step_weight_bytes_; }

 private:
  struct PackedLayer {
    kernels::WeightMatrix qkv;      // [q_dim + 2 kv_dim][dim]: Q, K and V in one GEMM
    std::vector<float> qkv_bias;    // [q_dim + 2 kv_dim], or empty when the model has none
    kernels::WeightMatrix output;   // [dim][q_dim]
    kernels::WeightMatrix gate_up;  // [2 ffn][dim]: gate rows, then up rows
    kernels::WeightMatrix down;     // [dim][ffn]
    std::unique_ptr<MoeFfn> moe;    // instead of gate_up and down in a mixture-of-experts model
  };

  void validate(const Batch& batch, const KvView& kv) const;
  void prepare(const Batch& batch);
  // Token `token`'s embedding, dequantized into out[dim].
  void embed(int32_t token, float* out);
  void attention_layer(const Batch& batch, const KvView& kv, int32_t layer);
  // Adds the LoRA deltas of each projection to its output rows (all ld_out apart) for the rows
  // whose entry has an adapter: the projections of one input (Q, K and V; gate and up) in one
  // fused pass.
  struct LoraOut {
    LoraProjection projection;
    float* out;
  };
  void apply_lora(int32_t layer, std::initializer_list<LoraOut> outs, const float* in, int ld_in, int ld_out);

  const Model& model_;
  tbb::task_arena arena_;
  std::vector<PackedLayer> layers_;
  kernels::WeightMatrix classifier_;  // output.weight, or token_embd when tied
  kernels::WeightMatrix rank_head_;   // weights.rank_output, or empty
  std::vector<float> rank_logits_;    // rank_scores' scratch
  // Whether token_embd's rows are read from the file (MappedFile::read) rather than through
  // the mapping: a lookup through the mapping costs a page fault and maps the fault-around
  // window (64 KiB) around its row, so over a long generation the whole table would become
  // resident beside the weights, and dropping those pages after each step (as we once did)
  // makes every step fault again — about 20 µs a row on a virtual machine. False when the
  // classifier reads the tied table in place every step anyway, or the file is not mapped.
  bool read_embedding_rows_ = false;
  std::vector<std::byte> embedding_row_;  // one row's bytes as the file holds them
  // The rotations: one table, or for Gemma 3 the global layers' and the sliding layers'.
  std::vector<kernels::RopeTable> ropes_;
  std::vector<int32_t> layer_rope_;  // each layer's table in ropes_

  // Per-step scratch, grown on demand and reused, so steady-state steps do not allocate.
  struct TokenRef {
    int32_t entry;
    int32_t position;
  };
  std::vector<TokenRef> tokens_;      // every new token of the step, entry by entry
  std::vector<int32_t> entry_start_;  // first row of each entry in tokens_
  // M-RoPE models: each token's rotary positions (temporal, height, width, extra).
  std::vector<std::array<int32_t, 4>> mrope_positions_;
  std::vector<int32_t> logit_rows_;   // rows of tokens_ that need logits
  std::vector<int32_t> hidden_rows_;  // rows of tokens_ that give their final hidden state
  std::vector<float> unused_hidden_;  // forward() without a hidden output: stays empty
  struct AttentionChunk {
    int32_t begin, end;  // rows of tokens_, all of one entry
    // The positions of the bidirectional run (BatchEntry::embeddings) the rows are in; empty
    // when they are in none.
    int32_t bidirectional_begin = 0, bidirectional_end = 0;
  };
  std::vector<AttentionChunk> attention_chunks_;
  // The K and V page addresses of the attention task each slot of the arena runs
  // (this_task_arena::current_thread_index), reused from task to task. Plain vectors owned here:
  // thread_locals outlived the Engine on TBB's parked workers (LeakSanitizer reported them at
  // exit), and an enumerable_thread_specific's elements sit where LeakSanitizer cannot always
  // trace them (libFuzzer's per-input leak check reported their buffers).
  struct PagePointers {
    std::vector<const std::byte*> k, v;
  };
  std::vector<PagePointers> page_pointers_;
  double attention_work_ = 0.0;  // multiply-adds of one layer's attention this step
  struct LoraSegment {
    int32_t begin, end;  // positions in lora_rows_ that share one adapter
    const LoraWeights* lora;
  };
  std::vector<int32_t> lora_entries_;  // entries with an adapter, grouped by adapter
  std::vector<int32_t> lora_rows_;     // their rows of tokens_, in that order
  std::vector<LoraSegment> lora_segments_;
  std::vector<kernels::LoraSegment> lora_calls_;  // lora_segments_ with each projection's factors, in turn
  std::vector<float> lora_tmp_;                   // [position in lora_rows_][max rank]: x·Aᵀ of each row
  int32_t lora_stride_ = 0;
  std::vector<float> x_, xb_, qkv_, att_, ffn_, hidden_, final_;
  std::vector<float> sublayer_;  // [n][dim]: an attention or FFN output before its post-norm (Gemma) or an MoE's
  MoeScratch moe_scratch_;
  double last_step_weight_bytes_ = 0.0;
};

}  // namespace pagoda
