#pragma once
// One forward step's work: a list of entries, each some new tokens of one sequence. Prefill
// chunks (many tokens) and decodes (one token) mix freely; a long prompt may come as several
// chunks over several steps.

#include <cstdint>
#include <span>
#include <vector>

#include "engine/kv/block_table.h"
#include "engine/lora/lora_weights.h"

namespace pagoda {

// Rows that stand in for the token embeddings of positions [position, position + count) of an
// entry's sequence: an image's rows from the vision encoder, dim floats each, row after row. The
// token ids at those positions are placeholders, never looked up. Gemma's √dim scale belongs to
// token embeddings and is not applied to them (as llama.cpp feeds embeddings).
//
// A `bidirectional` run's positions attend to each other both ways, earlier and later, in every
// layer (sliding ones too: a key is seen when it is in the query's window or in its run), as
// Gemma 3 attends within an image; the other positions stay causal and never see a run ahead of
// them. The flag belongs to the run, not to the model, because it is the image family's layout
// that asks for it (SequenceImage::bidirectional, from the projector). Every key of such a run
// must be in the cache before any of its queries attends, so the run must be computed whole in
// one step: the step planner never cuts one, and forward() refuses an entry whose new tokens
// hold only part of one.
struct EmbeddingRun {
  int32_t position = 0;
  int32_t count = 0;
  const float* rows = nullptr;
  bool bidirectional = false;
};

// Where an image's rows lie on its grid, for M-RoPE models (Qwen2-VL): rows × cols positions from
// `position`, in raster order. Such a model turns the row at (y, x) by the image's temporal
// position t and by t + y and t + x; the text after the image goes on from t + max(rows, cols)
// rather than from t + rows × cols (transformers' get_rope_index).
struct ImageGrid {
  int32_t position = 0;
  int32_t rows = 0;
  int32_t cols = 0;
};

struct BatchEntry {
  std::span<const int32_t> tokens;          // the new tokens, at positions n_cached, n_cached+1, ...
  int32_t n_cached = 0;                     // positions already in this sequence's KV cache
  const BlockTable* block_table = nullptr;  // holds pages for n_cached + tokens.size() positions
  bool needs_logits = false;                // logits for the entry's last new token
  const LoraWeights* lora = nullptr;        // the entry's adapter; nullptr = the base model
  bool all_logits = false;                  // logits for every new token, in order (scoring a text)
  // The rows needs_logits / all_logits ask for come back as final hidden states (after the
  // output norm, before the classifier) instead of logits: an embedding request's.
  bool hidden = false;
  // Embedding rows for some of the sequence's positions, sorted and disjoint; runs may reach
  // beyond the new tokens (an image split across prefill chunks): only the new positions are read.
  // A bidirectional run is either wholly among the new tokens or wholly outside them.
  std::span<const EmbeddingRun> embeddings;
  // Every image of the sequence, sorted and disjoint: the earlier ones too, since each moves the
  // rotary positions of all that follows it. Only M-RoPE models read them.
  std::span<const ImageGrid> image_grids;
};

struct Batch {
  std::vector<BatchEntry> entries;

  int32_t total_tokens() const {
    int32_t n = 0;
    for (const BatchEntry& e : entries) n += int32_t(e.tokens.size());
    return n;
  }
};

}  // namespace pagoda
