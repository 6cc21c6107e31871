#pragma once
// One timed job through the public Engine API: prompts submitted together, greedy, past any
// end-of-generation token, each token's arrival stamped as the engine streams it.

#include <chrono>
#include <cstdint>
#include <vector>

#include "pagoda/engine.h"

namespace pagoda::benchtool {

using Clock = std::chrono::steady_clock;

struct JobTimes {
  Clock::time_point start;                             // just before the first submit
  std::vector<std::vector<Clock::time_point>> tokens;  // per request, each token's arrival
  int64_t prefix_hit_tokens = 0;                       // prompt tokens the prefix cache gave

  double first_token_s(size_t request) const;  // from start
  double last_token_s(size_t request) const;
};

// Runs `prompts` at once, each for `max_new_tokens`, and returns once the engine is idle again
// (every page back in the pool, so the next job starts from the same state). Throws
// pagoda::Error when a request fails or stops short.
JobTimes run_job(Engine& engine, const std::vector<std::vector<int32_t>>& prompts, int32_t max_new_tokens);

}  // namespace pagoda::benchtool
