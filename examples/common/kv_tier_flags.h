#pragma once
// The prefix cache's tier flags the example programs share: --kv-disk DIR and --kv-disk-size
// BYTES (the disk tier, EngineConfig::kv_disk_path and kv_disk_bytes), and --kv-events
// ENDPOINT, --kv-events-replay ENDPOINT and --kv-events-topic T (vLLM's KV events for
// KV-aware routers).

#include <cctype>
#include <cstdint>
#include <optional>
#include <string>

#include "examples/common/args.h"
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
  --kv-disk-size BYTES    the files' total size, least recently used dropped first; a number
                          with an optional K, M, G or T (powers of 1024) (default 8G)
  --kv-events ENDPOINT    publish the prefix cache's block events as vLLM does (msgpack over
                          ZeroMQ PUB), e.g. tcp://*:5557, for KV-aware routers
  --kv-events-replay ENDPOINT  answer replay requests of recent events there, e.g. tcp://*:5558
  --kv-events-topic T     the events' topic (default: none)
)";

// "512", "64K", "1.5G", "2t": bytes, suffixes in powers of 1024. Throws pagoda::Error naming
// `flag` for anything else.
inline size_t parse_byte_size(const std::string& flag, const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  double scale = 1;
  if (used > 0 && used + 1 == text.size()) {
    switch (std::toupper(static_cast<unsigned char>(text.back()))) {
      case 'K': scale = 1024.0; break;
      case 'M': scale = 1024.0 * 1024; break;
      case 'G': scale = 1024.0 * 1024 * 1024; break;
      case 'T': scale = 1024.0 * 1024 * 1024 * 1024; break;
      default: used = 0;
    }
    if (used > 0) ++used;
  }
  const double bytes = value * scale;
  if (used == 0 || used != text.size() || !(bytes >= 1) || bytes > 9.0e18 ||
      !std::isdigit(static_cast<unsigned char>(text[0]))) {
    throw Error(flag + " must be a size in bytes, optionally with K, M, G or T (e.g. 64G), got '" + text + "'");
  }
  return size_t(bytes);
}

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
