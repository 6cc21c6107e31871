#pragma once
// pagoda-bench's command line: llama-bench's flags (every test parameter a comma list, or the
// flag repeated) and pagoda's -B for concurrent sequences.

#include <string>
#include <vector>

#include "pagoda/kv_cache_type.h"

namespace pagoda::benchtool {

enum class OutputFormat { Markdown, Json, Jsonl, Csv };

struct Options {
  std::vector<std::string> models;
  std::vector<int> n_prompt{512};
  std::vector<int> n_gen{128};
  std::vector<int> n_depth{0};
  std::vector<int> n_seqs;  // -B; empty: llama-bench's single-sequence pp and tg tests
  std::vector<int> threads;
  std::vector<int> n_batch{2048};  // llama's n_batch: EngineConfig::max_tokens_per_step
  std::vector<int> n_ubatch{512};  // llama's n_ubatch: EngineConfig::prefill_chunk
  std::vector<KvCacheType> cache_types{KvCacheType::F16};
  std::vector<bool> use_mmap{true};
  int reps = 5;
  OutputFormat output = OutputFormat::Markdown;
  bool progress = false;
  bool help = false;
};

extern const char* const kUsage;

// Throws pagoda::Error with a one-line message for an unknown flag or a bad value.
Options parse_options(int argc, char** argv);

// The values llama-bench would use with no flags, for the markdown table's choice of columns.
const Options& default_options();

}  // namespace pagoda::benchtool
