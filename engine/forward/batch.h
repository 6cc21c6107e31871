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
