#pragma once
// pagoda-loadgen's workloads: conversations of random token ids (a conversation of one turn is
// a plain request), drawn from the seed and the vocabulary alone, so that every backend and
// every run of a comparison gets the same ones; with --image, each carries one of the images.

#include <cstdint>
#include <limits>
#include <vector>

namespace pagoda::loadgen {

struct Range {
  int32_t lo = 0, hi = 0;
};

struct WorkloadSpec {
  int64_t conversations = 256;  // --requests: one request each without --turns
  int32_t turns = 1;
  double rate = std::numeric_limits<double>::infinity();  // conversations starting a second
  Range message_len{16, 128};                             // each turn's new message (--prompt-len)
  Range output_len{16, 256};                              // a conversation's reply length, every turn
  int32_t shared_prefix = 0;                              // tokens after BOS every conversation starts with
  uint64_t seed = 1;
  // After each turn a conversation waits behind all the others (an agent workload: the
  // contexts of all of them pass through the KV cache between two turns of one), instead of
  // keeping its client to its last turn (--turns: chat users, each in their own conversation).
  bool interleave_turns = false;
  // The prompt positions each --image takes (its encoder rows and its family's image tokens).
  // Conversation i carries image i mod their count in every turn. Empty: text only.
  std::vector<int32_t> image_lengths;
};

struct Conversation {
  double arrival_s;             // its first turn's, from the start of the run
  std::vector<int32_t> prompt;  // the first turn's: BOS, the shared prefix, the first message
  int32_t output_len;
  std::vector<std::vector<int32_t>> later_messages;  // the messages of turns 2..K
  int32_t image = -1;    // the image every turn carries, an index into the --image files; -1: none
  int32_t image_at = 0;  // where: before this prompt token, after BOS and the shared prefix
};

std::vector<Conversation> make_workload(const WorkloadSpec& spec, int32_t vocab, const std::vector<int32_t>& bos);

// --agent C:T:L: C conversations of T turns, their contexts growing to about L positions by
// the last turn's reply.
struct AgentShape {
  int64_t conversations = 0;
  int32_t turns = 0, context = 0;
};

// An agent loop's workload: every turn resends the whole conversation (its prompts and
// replies) with a new message of user or tool tokens, all of one length: the one that, with
// BOS, the shared prefix and T replies of `output_len`, brings the last turn to the shape's
// context. Every conversation starts at once, and their turns interleave.
WorkloadSpec agent_workload(const AgentShape& shape, int32_t output_len, int32_t shared_prefix, uint64_t seed);

// Positions of the longest conversation: BOS, the shared prefix, the longest image, then every
// turn's message and reply.
int32_t longest_positions(const WorkloadSpec& spec);

}  // namespace pagoda::loadgen
