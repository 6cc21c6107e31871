#pragma once
// What the prefix cache tells a KV-aware router (llm-d's endpoint picker, NVIDIA Dynamo): the
// token blocks each tier of this engine now holds and no longer holds, in the order it
// happened, as vLLM's KV events say it (BlockStored / BlockRemoved / AllBlocksCleared). A
// router that hears them sends a request to the replica that already holds its prefix.
//
// The page-pool actor makes the events (it alone names and forgets pages); a KvEventSink
// carries them out of the process (engine/events/kv_event_publisher.h: msgpack over ZeroMQ).

#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

#include "engine/kv/prefix_cache.h"

namespace pagoda {

// Where a block is held: the KV page pool in memory, or its disk tier (EngineConfig::kv_disk_path).
enum class KvTier { Ram, Disk };

// Consecutive token blocks of one sequence became cached in `tier`.
struct KvBlockStored {
  std::vector<PageHash> hashes;    // one per block, in sequence order
  std::optional<PageHash> parent;  // the hash of the block before the first; none at a sequence's start
  std::vector<int32_t> token_ids;  // the blocks' tokens: hashes.size() × block_size
  int32_t block_size = 0;          // tokens a block holds (tokens_per_page)
  int32_t group = 0;               // the KV group (kv_groups.h) whose pages these are
  KvTier tier = KvTier::Ram;
};

// Blocks left `tier` (evicted, or dropped as damaged).
struct KvBlockRemoved {
  std::vector<PageHash> hashes;
  int32_t group = 0;
  KvTier tier = KvTier::Ram;
};

// Every block of every tier is gone (the engine stopped, so its caches with it).
struct KvAllBlocksCleared {};

using KvEvent = std::variant<KvBlockStored, KvBlockRemoved, KvAllBlocksCleared>;

class KvEventSink {
 public:
  virtual ~KvEventSink() = default;
  // One batch of events, oldest first. Called from the page-pool actor's thread only; must
  // not block it (a sink queues the batch and sends it from a thread of its own).
  virtual void publish(std::vector<KvEvent> batch) = 0;
};

}  // namespace pagoda
