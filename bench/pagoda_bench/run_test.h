#pragma once
// Running one test on an engine as llama-bench does: its context first (with -d), one warm-up
// run that is not counted, then the timed runs, each on prompts of fresh random tokens.

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench/pagoda_bench/test_result.h"
#include "pagoda/engine.h"

namespace pagoda::benchtool {

// Random token ids for the whole run: no two prompts share a prefix (the prefix cache would
// otherwise skip part of a later test's prefill), except where a test shares its context.
class RandomTokens {
 public:
  explicit RandomTokens(int32_t vocab_size) : ids_(0, vocab_size - 1) {}
  std::vector<int32_t> next(int n);

 private:
  std::mt19937 rng_{42};
  std::uniform_int_distribution<int32_t> ids_;
};

// Says what the test is doing (for --progress); does nothing when empty.
using Say = std::function<void(const std::string&)>;
// Samples the machine's read bandwidth (bytes/s).
using SampleBandwidth = std::function<double()>;

// Throws pagoda::Error when a request fails or when the prefix cache did not give a pp test
// its whole context (the timing would include prefilling it). The bandwidth is sampled before
// the first timed run and after each, into TestResult::read_bytes_per_s.
TestResult run_test(Engine& engine, const TestSpec& spec, int reps, RandomTokens& tokens, const Say& say,
                    const SampleBandwidth& sample_bandwidth);

}  // namespace pagoda::benchtool
