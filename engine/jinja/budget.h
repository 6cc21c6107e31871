#pragma once
// The sandbox's bounds on one render: steps (statements, expression nodes, loop iterations and
// the items built-in operations touch), the size of any string or list built and of the output,
// and the depth of macro calls. A template that exceeds one fails with a pagoda::Error instead of
// running away with the CPU or memory.

#include <cstddef>
#include <cstdint>
#include <string>

#include "pagoda/error.h"

namespace pagoda::jinja {

struct Limits {
  uint64_t max_steps = 20'000'000;
  size_t max_output = size_t(8) << 20;  // bytes of output, and of any one string or list
  int max_call_depth = 64;              // macros calling macros
};

class Budget {
 public:
  explicit Budget(const Limits& limits) : limits_(limits) {}

  void step(uint64_t n = 1) {
    steps_ += n;
    if (steps_ > limits_.max_steps) {
      throw Error("template exceeded its budget of " + std::to_string(limits_.max_steps) + " steps");
    }
  }
  // Before building a string of `bytes` bytes or a list of `bytes` items.
  void check_size(size_t bytes) const {
    if (bytes > limits_.max_output) {
      throw Error("template output exceeds the limit of " + std::to_string(limits_.max_output) + " bytes");
    }
  }
  const Limits& limits() const { return limits_; }

 private:
  Limits limits_;
  uint64_t steps_ = 0;
};

}  // namespace pagoda::jinja
