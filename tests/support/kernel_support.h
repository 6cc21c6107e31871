#pragma once
// Helpers for the kernel tests: the instruction sets to run them on, and random inputs.

#include <cstddef>
#include <vector>

#include "kernels/cpu_features.h"

namespace pagoda::test {

// The instruction sets this CPU runs, portable first.
std::vector<kernels::Isa> supported_isas();

// `n` values drawn uniformly from [lo, hi) by std::mt19937(seed).
std::vector<float> random_uniform(std::size_t n, unsigned seed, float lo = -1.0f, float hi = 1.0f);

// `n` values drawn from a normal distribution of mean 0 and `stddev` by std::mt19937(seed).
std::vector<float> random_normal(std::size_t n, unsigned seed, float stddev = 1.0f);

}  // namespace pagoda::test
