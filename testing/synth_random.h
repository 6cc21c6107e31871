#pragma once
// Random numbers for the synthetic model and adapter writers, drawn from raw mt19937_64 bits
// (whose sequence the standard fixes) so every platform writes the same files for a seed.

#include <cstdint>
#include <random>

namespace pagoda {

// Uniform in [-1, 1).
inline float uniform_symmetric(std::mt19937_64& rng) {
  return float(int64_t(rng() >> 40) - (1 << 23)) * (1.0f / float(1 << 23));
}

}  // namespace pagoda
