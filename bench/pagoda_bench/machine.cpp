#include "bench/pagoda_bench/machine.h"

#include <tbb/info.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <fstream>
#include <vector>

#include "bench/fma_peak.h"

namespace pagoda::benchtool {

namespace {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("model name")) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
  }
  return "";
}

}  // namespace

double Machine::fma_flops_for(int threads) const {
  return cores > 0 ? fma_flops * double(std::min(threads, cores)) / double(cores) : 0.0;
}

Machine measure_machine(bench::ReadBandwidthProbe& probe) {
  Machine m;
  m.cpu_info = cpu_model_name();
  m.cores = tbb::info::default_concurrency();
  m.read_bytes_per_s = probe.sample(5);
  tbb::task_arena arena(m.cores);
  m.fma_flops = bench::measure_peak_flops(arena);
  return m;
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  if (!(in >> one >> five >> fifteen)) return "?";
  return one + " " + five + " " + fifteen;
}

}  // namespace pagoda::benchtool
