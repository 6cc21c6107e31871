#pragma once
// How close a test came to the machine's limits, measured in the same run. Decode reads every
// weight once per step (shared by the step's sequences) and each sequence's whole KV cache, so
// it is bound by the read bandwidth; prefill does 2 flops per matrix weight per token, plus
// attention, so it is bound by the FMA peak.

#include <optional>

#include "bench/pagoda_bench/machine.h"
#include "bench/pagoda_bench/model_facts.h"
#include "bench/pagoda_bench/test_result.h"

namespace pagoda::benchtool {

struct Roofline {
  // Decode (tg tests, and S_TG of -B jobs).
  std::optional<double> bandwidth_gbs;
  std::optional<double> roofline_ts;        // bandwidth / bytes read per generated token
  std::optional<double> roofline_fraction;  // the measured tokens/s over roofline_ts
  // Prefill (pp tests, and S_PP of -B jobs).
  std::optional<double> peak_gflops;  // the FMA peak of the test's threads
  std::optional<double> gflops;       // reached
  std::optional<double> peak_fraction;
};

Roofline roofline(const TestResult& result, const ModelFacts& model, KvCacheType cache_type, int threads,
                  const Machine& machine);

}  // namespace pagoda::benchtool
