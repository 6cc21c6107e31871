#pragma once
// Drives sequences through ModelRunner directly, without the engine: greedy decoding with
// llama2.c's rules, every sequence in the same steps, in prefill chunks of a given size.

#include <vector>

#include "engine/forward/model_runner.h"
#include "engine/kv/page_pool.h"

namespace pagoda::test {

// A sequence driven through the runner with llama2.c's greedy rules.
struct DrivenSequence {
  std::vector<int32_t> tokens;  // prompt, then generated
  size_t prompt_len = 0;
  int32_t max_positions = 0;  // positions fed at most
  int32_t stop_id = -1;
  int32_t n_cached = 0;
  BlockTable table{16};                    // made for the pool's layout (its KV groups) when the sequence starts
  const LoraWeights* lora = nullptr;       // its adapter, if any
  std::vector<EmbeddingRun> embeddings;    // rows fed instead of some positions' token embeddings
  std::vector<ImageGrid> image_grids;      // its images' grids, for an M-RoPE model's positions
  std::vector<std::vector<float>> logits;  // one row each time logits were produced
  bool done = false;

  DrivenSequence(std::vector<int32_t> prompt, int32_t max_pos, int32_t stop, int32_t tokens_per_page)
      : tokens(std::move(prompt)),
        prompt_len(tokens.size()),
        max_positions(max_pos),
        stop_id(stop),
        table(tokens_per_page) {}
  std::vector<int32_t> generated() const { return {tokens.begin() + ptrdiff_t(prompt_len), tokens.end()}; }
};

// Runs every sequence to its end, all in the same steps: each step holds a chunk of at most
// `chunk` tokens of every unfinished sequence (prefill chunks and decodes mixed), stretched to
// the end of a bidirectional embedding run it would cut (such a run is computed whole). Logits come
// for each chunk's last token, only at the sequence's end unless `logits_everywhere`. After
// each step, sliding-window groups give back the pages no later query sees, as the engine
// does. Pages are released at the end unless `release_pages` is false (the caller then
// releases them). Returns the most pages in use at once.
int32_t run_together(ModelRunner& runner, PagePool& pool, std::vector<DrivenSequence>& seqs, int32_t chunk,
                     bool logits_everywhere = false, bool release_pages = true);

}  // namespace pagoda::test
