#include "bench/pagoda_bench/test_result.h"

#include <cmath>
#include <numeric>

namespace pagoda::benchtool {

double mean(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
}

double stdev(const std::vector<double>& v) {
  if (v.size() < 2) return 0.0;
  const double m = mean(v);
  double squares = 0.0;
  for (double x : v) squares += (x - m) * (x - m);
  return std::sqrt(squares / double(v.size() - 1));
}

namespace {

std::vector<double> as_doubles(const std::vector<uint64_t>& v) { return {v.begin(), v.end()}; }

}  // namespace

double TestResult::avg_ns() const { return mean(as_doubles(samples_ns)); }
double TestResult::stddev_ns() const { return stdev(as_doubles(samples_ns)); }

}  // namespace pagoda::benchtool
