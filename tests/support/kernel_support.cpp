#include "support/kernel_support.h"

#include <random>

namespace pagoda::test {

std::vector<kernels::Isa> supported_isas() {
  std::vector<kernels::Isa> isas;
  for (kernels::Isa isa : {kernels::Isa::Portable, kernels::Isa::Avx2, kernels::Isa::Avx512})
    if (kernels::cpu_supports(isa)) isas.push_back(isa);
  return isas;
}

std::vector<float> random_uniform(std::size_t n, unsigned seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<float> random_normal(std::size_t n, unsigned seed, float stddev) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace pagoda::test
