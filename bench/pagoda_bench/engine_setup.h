#pragma once
// The engines of a run: one per combination of the flags llama-bench reloads its model or
// context for, each sized for every test it runs.

#include <string>
#include <vector>

#include "bench/pagoda_bench/model_facts.h"
#include "bench/pagoda_bench/options.h"
#include "bench/pagoda_bench/test_spec.h"
#include "pagoda/engine_config.h"

namespace pagoda::benchtool {

inline constexpr int32_t kTokensPerPage = 16;

struct Instance {
  std::string model;
  int threads = 0;
  int n_batch = 0;
  int n_ubatch = 0;
  KvCacheType cache_type = KvCacheType::F16;
  bool use_mmap = true;
};

// In llama-bench's order: model, batch sizes, cache type, mmap, threads.
std::vector<Instance> plan_instances(const Options& options);

// Throws pagoda::Error for the first test that needs more positions than the model has, or a
// cache type its heads do not fit: before anything runs, as the engine would only say so later.
void check_model(const ModelFacts& model, const Options& options, const std::vector<TestSpec>& tests);

// Greedy requests with prefix caching (-d takes its context from it), a KV cache made
// resident at start (no page fault is timed) and large enough for the biggest test with the
// previous run's cached pages beside it, and room for every sequence of a -B job in one step.
EngineConfig engine_config(const Instance& instance, const std::vector<TestSpec>& tests);

}  // namespace pagoda::benchtool
