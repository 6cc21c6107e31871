#pragma once
// The machine a run measured: its CPU, and the two rooflines measured in the same process
// (these machines are too noisy for figures from another day to compare against). The read
// bandwidth drifts within minutes, so the probe stays for the run and is sampled again beside
// each test (TestResult::read_bytes_per_s); the figure here is the one at start.

#include <string>

#include "bench/read_bandwidth.h"

namespace pagoda::benchtool {

struct Machine {
  std::string cpu_info;         // /proc/cpuinfo's model name, as llama-bench's cpu_info
  int cores = 0;                // hardware threads the rooflines were measured on
  double read_bytes_per_s = 0;  // streaming read bandwidth at start, every core reading
  double fma_flops = 0;         // fp32 FMA peak, every core

  // The FMA peak of `threads` of them: FMA throughput grows with each core that runs it.
  double fma_flops_for(int threads) const;
};

// Takes a few seconds (the probe's 512 MiB read five times, FMA chains on every core).
Machine measure_machine(bench::ReadBandwidthProbe& probe);

// /proc/loadavg's three averages, as "0.96 0.62 0.28", or "?" when it cannot be read.
std::string load_average();

}  // namespace pagoda::benchtool
