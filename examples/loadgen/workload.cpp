#include "examples/loadgen/workload.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "pagoda/error.h"

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
    if (!spec.image_lengths.empty()) {
      c.image = int32_t(i % int64_t(spec.image_lengths.size()));
      c.image_at = int32_t(head.size());
    }
    for (int32_t turn = 1; turn < spec.turns; ++turn) {
      c.later_messages.emplace_back();
      for (int32_t n = message_len(rng); n > 0; --n) c.later_messages.back().push_back(token(rng));
    }
    work.push_back(std::move(c));
  }
  return work;
}

WorkloadSpec agent_workload(const AgentShape& shape, int32_t output_len, int32_t shared_prefix, uint64_t seed) {
  const int64_t fixed = 1 + int64_t(shared_prefix) + int64_t(shape.turns) * output_len;  // BOS, prefix, replies
  const int64_t message_len = (shape.context - fixed) / shape.turns;
  if (message_len < 1) {
    throw Error("--agent " + std::to_string(shape.conversations) + ":" + std::to_string(shape.turns) + ":" +
                std::to_string(shape.context) + " leaves no room for messages: BOS, the shared prefix and " +
                std::to_string(shape.turns) + " replies of " + std::to_string(output_len) + " tokens take " +
                std::to_string(fixed) + " positions");
  }
  WorkloadSpec spec;
  spec.conversations = shape.conversations;
  spec.turns = shape.turns;
  spec.message_len = {int32_t(message_len), int32_t(message_len)};
  spec.output_len = {output_len, output_len};
  spec.shared_prefix = shared_prefix;
  spec.seed = seed;
  spec.interleave_turns = true;
  return spec;
}

int32_t longest_positions(const WorkloadSpec& spec) {
  const int64_t image =
      spec.image_lengths.empty() ? 0 : *std::max_element(spec.image_lengths.begin(), spec.image_lengths.end());
  return int32_t(std::min<int64_t>(
      1 + int64_t(spec.shared_prefix) + image + int64_t(spec.turns) * (spec.message_len.hi + spec.output_len.hi),
      INT32_MAX));
}

}  // namespace pagoda::loadgen
