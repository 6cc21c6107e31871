#pragma once
// The reference model (testing/reference_model) as the tests' oracle.

#include <cstdint>
#include <vector>

#include "engine/model/model.h"

namespace pagoda::test {

// Greedy ids from the oracle: the prompt fed position by position, then `n` argmax tokens.
std::vector<int32_t> oracle_greedy(const Model& m, const std::vector<int32_t>& prompt, int32_t n);

}  // namespace pagoda::test
