#include "support/batch_driver.h"

#include <algorithm>
#include <stdexcept>

#include "engine/sampling/sampler.h"

namespace pagoda::test {

int32_t run_together(ModelRunner& runner, PagePool& pool, std::vector<DrivenSequence>& seqs, int32_t chunk,
                     bool logits_everywhere, bool release_pages) {
  std::vector<float> logits;
  int32_t peak = pool.used_pages();
  for (DrivenSequence& s : seqs) {
    if (s.table.capacity_tokens() == 0) s.table = BlockTable(pool.layout());
  }
  for (;;) {
    Batch batch;
    std::vector<DrivenSequence*> in_batch;
    for (DrivenSequence& s : seqs) {
      if (s.done) continue;
      int32_t n_new = std::min<int32_t>(chunk, int32_t(s.tokens.size()) - s.n_cached);
      for (const EmbeddingRun& run : s.embeddings) {  // a run that attends both ways goes whole
        if (run.bidirectional && run.position < s.n_cached + n_new && run.position + run.count > s.n_cached + n_new)
          n_new = run.position + run.count - s.n_cached;
      }
      if (!s.table.reserve(s.n_cached, s.n_cached + n_new, pool))
        throw std::runtime_error("the test's KV pool is too small");
      BatchEntry e;
      e.tokens = std::span<const int32_t>(s.tokens).subspan(s.n_cached, n_new);
      e.n_cached = s.n_cached;
      e.block_table = &s.table;
      e.lora = s.lora;
      e.embeddings = s.embeddings;
      e.image_grids = s.image_grids;
      e.needs_logits = logits_everywhere || s.n_cached + n_new == int32_t(s.tokens.size());
      batch.entries.push_back(e);
      in_batch.push_back(&s);
    }
    if (batch.entries.empty()) break;
    peak = std::max(peak, pool.used_pages());
    runner.forward(batch, pool.view(), logits);
    const int32_t vocab = runner.config().vocab_size;
    size_t row = 0;
    for (size_t i = 0; i < in_batch.size(); ++i) {
      DrivenSequence& s = *in_batch[i];
      s.n_cached += int32_t(batch.entries[i].tokens.size());
      pool.release(s.table.take_dead_pages(s.n_cached));
      if (!batch.entries[i].needs_logits) continue;
      std::span<const float> r(logits.data() + row++ * vocab, vocab);
      s.logits.emplace_back(r.begin(), r.end());
      if (s.n_cached < int32_t(s.tokens.size())) continue;  // still in the prompt
      const int32_t next = argmax(r);
      s.tokens.push_back(next);
      s.done = next == s.stop_id || s.n_cached >= s.max_positions;
    }
  }
  if (release_pages) {
    for (DrivenSequence& s : seqs) s.table.release(pool);
  }
  return peak;
}

}  // namespace pagoda::test
