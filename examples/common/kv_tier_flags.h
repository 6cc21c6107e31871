#pragma once
// The prefix cache's tier flags the example programs share: --kv-disk DIR and --kv-disk-size
// BYTES (the disk tier, EngineConfig::kv_disk_path and kv_disk_bytes), and --kv-events
// ENDPOINT, --kv-events-replay ENDPOINT and --kv-events-topic T (vLLM's KV events for
// KV-aware routers).

#include <cstdint>
#include <optional>
#include <string>

#include "examples/common/args.h"
#include "examples/common/byte_size.h"
#include "pagoda/engine_config.h"
#include "pagoda/error.h"

namespace pagoda::cli {

inline constexpr const char* kKvTierFlags[] = {"--kv-disk", "--kv-disk-size", "--kv-events", "--kv-events-replay",
                                               "--kv-events-topic"};

inline constexpr const char* kKvTierUsage =
    R"(prefix cache tiers (outputs are the same with and without them, bit for bit):
  --kv-disk DIR           also keep prefix KV pages as files in DIR: a prefix evicted from
                          memory, or computed before a restart, is read back instead of
                          computed again (files of other models never match)
  --kv-disk-size BYTES    the files' total size, least recently used dropped first; bytes, or
                          with K, M, G or T (powers of 1024) (default 8G)
  --kv-events ENDPOINT    publish the prefix cache's block events as vLLM does (msgpack over
                          ZeroMQ PUB), e.g. tcp://*:5557, for KV-aware routers
  --kv-events-replay ENDPOINT  answer replay requests of recent events there, e.g. tcp://*:5558
  --kv-events-topic T     the events' topic (default: none)
)";

// What the flags say, to be set on an EngineConfig.
struct KvTierFlags {
  std::string disk_path;
  std::optional<size_t> disk_bytes;
  std::string events, events_replay, events_topic;

  void apply(EngineConfig& config) const {
    config.kv_disk_path = disk_path;
    if (disk_bytes) config.kv_disk_bytes = *disk_bytes;
    config.kv_events_endpoint = events;
    config.kv_events_replay_endpoint = events_replay;
    config.kv_events_topic = events_topic;
  }
};

// Throws pagoda::Error for a bad size, or a flag without the one it needs.
inline KvTierFlags kv_tier_flags(const Args& args) {
  KvTierFlags f;
  f.disk_path = args.get("--kv-disk", "");
  if (auto size = args.get("--kv-disk-size")) {
    if (f.disk_path.empty()) throw Error("--kv-disk-size needs --kv-disk DIR");
    f.disk_bytes = parse_byte_size("--kv-disk-size", *size);
  }
  f.events = args.get("--kv-events", "");
  f.events_replay = args.get("--kv-events-replay", "");
  f.events_topic = args.get("--kv-events-topic", "");
  if (f.events.empty() && !f.events_replay.empty()) throw Error("--kv-events-replay needs --kv-events ENDPOINT");
  return f;
}

}  // namespace pagoda::cli
