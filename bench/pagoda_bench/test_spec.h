#pragma once
// The tests of a run, as llama-bench names and orders them: for each depth, a ppN test per
// prompt length and a tgN test per generation length; with -B, one batched job per sequence
// count and pair of lengths instead.

#include <string>
#include <vector>

#include "bench/pagoda_bench/options.h"

namespace pagoda::benchtool {

enum class TestKind {
  Prompt,      // ppN: the time to the first token of an N-token prompt
  Generation,  // tgN: the time of N decode steps, after the prefill
  Batched,     // -B: the whole job of B sequences, prompts and generation
};

struct TestSpec {
  TestKind kind = TestKind::Prompt;
  int n_prompt = 0;  // as llama-bench reports it: 0 for tg tests
  int n_gen = 0;     // 0 for pp tests
  int n_depth = 0;   // context tokens before the prompt, taken from the prefix cache
  int n_seqs = 1;

  // "pp512", "tg128 @ d4096", "pp512+tg128 x8"
  std::string name() const;
  // Prompt tokens each request feeds after its depth context: a generation with no prompt and
  // no context still needs one token to start from.
  int fresh_prompt() const;
  // The first token comes from the prefill; each one after it is a decode step.
  int max_new_tokens() const;
  // Positions of one request: depth + fresh prompt + generated tokens.
  int positions() const { return n_depth + fresh_prompt() + max_new_tokens(); }
};

// Throws pagoda::Error when every -p and -n is 0.
std::vector<TestSpec> plan_tests(const Options& options);

}  // namespace pagoda::benchtool
