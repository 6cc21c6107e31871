#pragma once
// The KV-events publisher: the KvEventSink (engine/kv/kv_events.h) that sends the prefix cache's
// events out of the process exactly as vLLM's ZmqEventPublisher does (vllm/distributed/
// kv_events.py), so a KV-aware router (llm-d's kv-cache indexer, NVIDIA Dynamo's KV router)
// subscribes to a pagoda replica as it subscribes to a vLLM one.
//
// The wire, as vLLM sends it:
// - a ZeroMQ PUB socket sends each batch as three frames: the topic, the batch's sequence number
//   (8 bytes, big-endian, from 0 up) and the msgpack payload;
// - an optional ROUTER socket replays recent batches: a request [empty frame, start sequence
//   (big-endian)] — what a REQ socket sends — gets one [empty, sequence, payload] reply per kept
//   batch from `start` on, then the end marker [empty, 8 bytes of 0xff (-1), empty payload];
// - the payload is msgspec's array_like, omit_defaults, tagged encoding of vLLM's KVEventBatch
//   (see encode_kv_event_batch).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/kv/kv_events.h"

namespace pagoda {

struct KvEventPublisherOptions {
  // Where the PUB socket sends. vLLM's rule, so one configuration serves both engines: bound when
  // it names a wildcard host ("tcp://*:5557") or an IPv6 one ("::"), or is ipc:// or inproc://;
  // otherwise connected, e.g. to an indexer that binds ("tcp://indexer:5557", llm-d's layout).
  std::string endpoint;
  // Where the ROUTER socket that replays batches is bound; empty: no replay.
  std::string replay_endpoint;
  // The first frame of every message. llm-d's indexer reads "kv@<pod>@<model>" from it.
  std::string topic;
  // The batch's third field. vLLM's publisher always sets it (0 without data parallelism) and
  // Dynamo's decoder expects it; pagoda has no data-parallel ranks, so it is only a label here
  // (vLLM also moves its ports by the rank; the endpoints are used as given).
  int32_t data_parallel_rank = 0;
  // Batches kept for replay (vLLM's buffer_steps).
  size_t replay_batches = 10'000;
  // Batches waiting to be sent beyond which publish() drops the newest (vLLM's max_queue_size;
  // vLLM blocks its scheduler there instead, which the page-pool actor must never do).
  size_t max_queued_batches = 100'000;
  // Messages the PUB socket queues per subscriber before dropping (vLLM's hwm).
  int32_t send_high_water_mark = 100'000;
  // How long closing the sockets may wait for messages still queued to subscribers.
  std::chrono::milliseconds linger{1000};
};

class KvEventPublisher final : public KvEventSink {
 public:
  // Opens the sockets and starts the sending thread. Throws pagoda::Error naming the endpoint
  // and ZeroMQ's reason when an endpoint cannot be bound or connected.
  explicit KvEventPublisher(KvEventPublisherOptions options);
  // Sends what is still queued, then closes the sockets, waiting at most options.linger.
  ~KvEventPublisher() override;
  KvEventPublisher(const KvEventPublisher&) = delete;
  KvEventPublisher& operator=(const KvEventPublisher&) = delete;

  // Stamps the batch with the time now and queues it for the sending thread; never waits on
  // the network (see KvEventPublisherOptions::max_queued_batches). An empty batch is ignored.
  void publish(std::vector<KvEvent> batch) override;

  // The PUB endpoint as ZeroMQ resolved it when bound (a port given as "*" becomes the one
  // chosen), as given when connected.
  const std::string& endpoint() const;
  // The replay endpoint as bound; empty without replay.
  const std::string& replay_endpoint() const;
  // Batches publish() dropped because max_queued_batches were waiting.
  int64_t dropped_batches() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The `medium` of events in `tier`.
const char* kv_event_medium(KvTier tier);

// One batch's msgpack payload, byte for byte what vLLM's msgspec encoder writes for a
// KVEventBatch(ts, events, data_parallel_rank):
//   [ts (float64, seconds since the epoch), [event...], data_parallel_rank]
//   ["BlockStored", block_hashes, parent_block_hash or nil, token_ids, block_size,
//    lora_id = nil, medium, lora_name = nil]
//   ["BlockRemoved", block_hashes, medium]
//   ["AllBlocksCleared"]
// Fields vLLM gives defaults (extra_keys, group_idx, kv_cache_spec_*) are omitted, as
// omit_defaults omits them when they are None. A block hash is the low 64 bits of its PageHash
// as an unsigned integer (the .cpp says why).
std::string encode_kv_event_batch(double ts, std::span<const KvEvent> events, int32_t data_parallel_rank);

}  // namespace pagoda
