#pragma once
// The machine a run measured: its CPU, and the two rooflines measured in the same process at
// start (these machines are too noisy for figures from another day to compare against).

#include <string>

namespace pagoda::benchtool {

struct Machine {
  std::string cpu_info;        // /proc/cpuinfo's model name, as llama-bench's cpu_info
  int cores = 0;               // hardware threads the rooflines were measured on
  double read_bytes_per_s = 0; // streaming read bandwidth, every core reading
  double fma_flops = 0;        // fp32 FMA peak, every core

  // The FMA peak of `threads` of them: FMA throughput grows with each core that runs it.
  double fma_flops_for(int threads) const;
};

// Takes a few seconds (a 1 GiB buffer read five times, FMA chains on every core).
Machine measure_machine();

// /proc/loadavg's three averages, as "0.96 0.62 0.28", or "?" when it cannot be read.
std::string load_average();

}  // namespace pagoda::benchtool
