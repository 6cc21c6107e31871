#pragma once
// What one test measured: a sample per timed run, and the statistics llama-bench reports.

#include <cstdint>
#include <string>
#include <vector>

#include "bench/pagoda_bench/test_spec.h"

namespace pagoda::benchtool {

// The mean, and the sample standard deviation (0 for fewer than two values), as llama-bench.
double mean(const std::vector<double>& v);
double stdev(const std::vector<double>& v);

struct TestResult {
  TestSpec spec;
  std::string test_time;  // when the test started, RFC 3339 in UTC as llama-bench writes it
  std::vector<uint64_t> samples_ns;
  std::vector<double> samples_ts;    // the test's tokens per second, one per run
  std::vector<double> samples_s_pp;  // -B only: prompt tokens per second of the prefill phase
  std::vector<double> samples_s_tg;  // -B only: tokens per second of the decode phase
  // The best streaming-read bandwidth (bytes/s) sampled beside the timed runs (before the
  // first, after each): the machine's bandwidth drifts too much for one figure per run.
  double read_bytes_per_s = 0;

  double avg_ns() const;
  double stddev_ns() const;
  double avg_ts() const { return mean(samples_ts); }
  double stddev_ts() const { return stdev(samples_ts); }
};

}  // namespace pagoda::benchtool
