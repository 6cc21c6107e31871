#include "examples/loadgen/workload.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace pagoda::loadgen {

std::vector<Conversation> make_workload(const WorkloadSpec& spec, int32_t vocab, const std::vector<int32_t>& bos) {
  std::mt19937_64 rng(spec.seed);
  std::exponential_distribution<double> gap(std::isinf(spec.rate) ? 1.0 : spec.rate);
  std::uniform_int_distribution<int32_t> message_len(spec.message_len.lo, spec.message_len.hi);
  std::uniform_int_distribution<int32_t> output_len(spec.output_len.lo, spec.output_len.hi);
  std::uniform_int_distribution<int32_t> token(0, vocab - 1);
  std::vector<int32_t> head = bos;
  for (int32_t i = 0; i < spec.shared_prefix; ++i) head.push_back(token(rng));
  std::vector<Conversation> work;
  double t = 0.0;
  for (int64_t i = 0; i < spec.conversations; ++i) {
    if (!std::isinf(spec.rate)) t += gap(rng);
    Conversation c{t, head, 0, {}};
    for (int32_t n = message_len(rng); n > 0; --n) c.prompt.push_back(token(rng));
    c.output_len = output_len(rng);
    for (int32_t turn = 1; turn < spec.turns; ++turn) {
      c.later_messages.emplace_back();
      for (int32_t n = message_len(rng); n > 0; --n) c.later_messages.back().push_back(token(rng));
    }
    work.push_back(std::move(c));
  }
  return work;
}

int32_t longest_positions(const WorkloadSpec& spec) {
  return int32_t(std::min<int64_t>(
      1 + int64_t(spec.shared_prefix) + int64_t(spec.turns) * (spec.message_len.hi + spec.output_len.hi), INT32_MAX));
}

}  // namespace pagoda::loadgen
