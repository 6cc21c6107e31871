#include "bench/pagoda_bench/engine_setup.h"

#include <algorithm>
#include <cstdint>

#include "kernels/kv_rows.h"
#include "pagoda/error.h"

namespace pagoda::benchtool {

std::vector<Instance> plan_instances(const Options& o) {
  std::vector<Instance> instances;
  for (const std::string& model : o.models)
    for (int n_batch : o.n_batch)
      for (int n_ubatch : o.n_ubatch)
        for (KvCacheType type : o.cache_types)
          for (bool mmap : o.use_mmap)
            for (int threads : o.threads) instances.push_back({model, threads, n_batch, n_ubatch, type, mmap});
  return instances;
}

void check_model(const ModelFacts& model, const Options& options, const std::vector<TestSpec>& tests) {
  for (KvCacheType type : options.cache_types) {
    if (kernels::kv_row_fits(type, model.head_dim)) continue;
    throw Error(std::string("-ctk ") + kv_cache_type_name(type) + " does not fit " + model.path + ": its head_dim " +
                std::to_string(model.head_dim) + " is not a multiple of " + std::to_string(kernels::kQ8_0Block));
  }
  for (const TestSpec& t : tests) {
    if (t.positions() <= model.context_length) continue;
    throw Error(t.name() + " needs " + std::to_string(t.positions()) + " positions (depth " +
                std::to_string(t.n_depth) + " + prompt " + std::to_string(t.fresh_prompt()) + " + " +
                std::to_string(t.max_new_tokens()) + " generated) but " + model.path + " has a context of " +
                std::to_string(model.context_length));
  }
}

namespace {

// A run's pages: its own, and those of the depth context it shares. When it is admitted, the
// previous run's pages are still cached, the context among them, and the pool evicts the least
// recently used first; room for two runs keeps the context from being evicted.
int32_t kv_pages_for(const std::vector<TestSpec>& tests) {
  int64_t pages = 0;
  for (const TestSpec& t : tests) {
    const int64_t per_sequence = (t.positions() + kTokensPerPage - 1) / kTokensPerPage;
    pages = std::max(pages, 2 * per_sequence * t.n_seqs);
  }
  // The prefill scheduler admits only while 1% of the pages stay free for running sequences.
  pages += pages / 50 + 2;
  if (pages > INT32_MAX)
    throw Error("the tests need " + std::to_string(pages) + " KV pages, more than an engine can have");
  return int32_t(pages);
}

int max_seqs(const std::vector<TestSpec>& tests) {
  int n = 1;
  for (const TestSpec& t : tests) n = std::max(n, t.n_seqs);
  return n;
}

}  // namespace

EngineConfig engine_config(const Instance& instance, const std::vector<TestSpec>& tests) {
  EngineConfig c;
  c.model_path = instance.model;
  c.use_mmap = instance.use_mmap;
  c.threads = instance.threads;
  c.kv_pages = kv_pages_for(tests);
  c.tokens_per_page = kTokensPerPage;
  c.kv_cache_type = instance.cache_type;
  c.max_tokens_per_step = instance.n_batch;
  c.prefill_chunk = instance.n_ubatch;
  c.max_entries_per_step = std::max(c.max_entries_per_step, max_seqs(tests));
  c.max_running = std::max(c.max_running, max_seqs(tests));
  c.prefix_caching = true;
  c.kv_prefault = true;
  return c;
}

}  // namespace pagoda::benchtool
