// The KV-events publisher (kv_event_publisher.h): the msgpack encoding of a batch, the ZeroMQ
// sockets, the queue publish() fills and the thread that empties it, sends and serves replays.

#include "engine/events/kv_event_publisher.h"

#include <sys/eventfd.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <deque>
#include <initializer_list>
#include <msgpack.hpp>
#include <mutex>
#include <string_view>
#include <thread>
#include <utility>

#include "pagoda/error.h"

namespace pagoda {

const char* kv_event_medium(KvTier tier) {
  // vLLM calls the tier its attention reads pages from "GPU" (MEDIUM_GPU) and its offloaded
  // copies "CPU". pagoda's RAM pool is the tier attention reads from, so in a router's terms it
  // is "GPU": llm-d weighs it fullest, Dynamo counts it as the device tier. vLLM has no disk
  // tier; "DISK" is the name Dynamo's medium parser maps to its disk tier and llm-d (which
  // lowercases mediums) to the "disk" its scoring weights are configured by. "CPU" would be
  // wrong twice: the disk tier is slower than host memory, and older Dynamo parsers do not know
  // it and fall back to the device tier.
  return tier == KvTier::Ram ? "GPU" : "DISK";
}

namespace {

using Packer = msgpack::packer<msgpack::sbuffer>;

// vLLM publishes a block hash as an unsigned 64-bit integer by default (its digest's low 64
// bits; raw bytes only with VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0). Dynamo's decoder accepts
// only integers, llm-d's integers or bytes (of which it keeps the last 8), so both take the
// low 64 bits of pagoda's 128-bit PageHash. Routers use the hash only to name a block and link
// it to its parent (they hash the tokens themselves to match prompts), so 64 bits are plenty.
void pack_hash(Packer& out, const PageHash& hash) { out.pack_uint64(hash.low); }

void pack_hashes(Packer& out, const std::vector<PageHash>& hashes) {
  out.pack_array(uint32_t(hashes.size()));
  for (const PageHash& hash : hashes) pack_hash(out, hash);
}

void pack_string(Packer& out, std::string_view s) {
  out.pack_str(uint32_t(s.size()));
  out.pack_str_body(s.data(), uint32_t(s.size()));
}

// One event as msgspec encodes a tagged array_like struct: the class name, then the fields in
// declaration order, trailing fields left at their defaults omitted. KvBlockStored::group and
// KvBlockRemoved::group stay off the wire: vLLM's group_idx sits after extra_keys, at the index
// Dynamo's positional decoder reads as block_mm_infos, where an integer fails the whole batch.
struct EventPacker {
  Packer& out;

  void operator()(const KvBlockStored& e) const {
    out.pack_array(8);
    pack_string(out, "BlockStored");
    pack_hashes(out, e.hashes);
    if (e.parent) pack_hash(out, *e.parent);
    else out.pack_nil();
    out.pack_array(uint32_t(e.token_ids.size()));
    for (int32_t token : e.token_ids) out.pack_int32(token);
    out.pack_int32(e.block_size);
    out.pack_nil();  // lora_id (deprecated in vLLM)
    pack_string(out, kv_event_medium(e.tier));
    out.pack_nil();  // lora_name: the event does not say; the hash chain's seed covers the adapter
  }

  void operator()(const KvBlockRemoved& e) const {
    out.pack_array(3);
    pack_string(out, "BlockRemoved");
    pack_hashes(out, e.hashes);
    pack_string(out, kv_event_medium(e.tier));
  }

  void operator()(const KvAllBlocksCleared&) const {
    out.pack_array(1);
    pack_string(out, "AllBlocksCleared");
  }
};

// vLLM's rule for whether the PUB endpoint is bound or connected ("bind stable, connect
// volatile").
bool binds(const std::string& endpoint) {
  return endpoint.find('*') != std::string::npos || endpoint.find("::") != std::string::npos ||
         endpoint.starts_with("ipc://") || endpoint.starts_with("inproc://");
}

std::string big_endian(uint64_t value) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[size_t(7 - i)] = char(uint8_t(value >> (8 * i)));
  return bytes;
}

// A replay request's start, read as Python's int.from_bytes(bytes, "big") reads it: any
// length, unsigned; past 64 bits it is beyond every sequence number, so it saturates.
uint64_t read_big_endian(const std::string& bytes) {
  uint64_t value = 0;
  for (char c : bytes) {
    if (value > (UINT64_MAX >> 8)) return UINT64_MAX;
    value = (value << 8) | uint8_t(c);
  }
  return value;
}

// The sequence number of the message that ends a replay: -1 as 8 big-endian bytes.
const std::string kReplayEnd(8, char(0xff));

std::string zmq_reason() { return zmq_strerror(zmq_errno()); }

std::string last_endpoint(void* socket) {
  char buffer[1024] = {};
  size_t size = sizeof buffer;
  if (zmq_getsockopt(socket, ZMQ_LAST_ENDPOINT, buffer, &size) != 0) return {};
  return buffer;
}

void set_option(void* socket, int option, int value, const char* what) {
  if (zmq_setsockopt(socket, option, &value, sizeof value) != 0)
    throw Error(std::string("KV events: cannot set ") + what + ": " + zmq_reason());
}

// The frames of one message waiting on `socket`, or false when none is.
bool receive_frames(void* socket, std::vector<std::string>& frames) {
  frames.clear();
  int flags = ZMQ_DONTWAIT;  // a message's later frames arrive with its first
  for (;;) {
    zmq_msg_t frame;
    zmq_msg_init(&frame);
    if (zmq_msg_recv(&frame, socket, flags) < 0) {
      zmq_msg_close(&frame);
      return false;
    }
    frames.emplace_back(static_cast<const char*>(zmq_msg_data(&frame)), zmq_msg_size(&frame));
    bool more = zmq_msg_more(&frame);
    zmq_msg_close(&frame);
    if (!more) return true;
    flags = 0;
  }
}

void send_frames(void* socket, std::initializer_list<std::string_view> frames) {
  size_t left = frames.size();
  for (std::string_view frame : frames) {
    // PUB and ROUTER drop a message a peer has no room for rather than wait.
    zmq_send(socket, frame.data(), frame.size(), ZMQ_DONTWAIT | (--left > 0 ? ZMQ_SNDMORE : 0));
  }
}

}  // namespace

std::string encode_kv_event_batch(double ts, std::span<const KvEvent> events, int32_t data_parallel_rank) {
  msgpack::sbuffer buffer;
  Packer out(buffer);
  out.pack_array(3);
  out.pack_double(ts);
  out.pack_array(uint32_t(events.size()));
  for (const KvEvent& event : events) std::visit(EventPacker{out}, event);
  out.pack_int32(data_parallel_rank);
  return std::string(buffer.data(), buffer.size());
}

struct KvEventPublisher::Impl {
  struct Batch {
    double ts;
    std::vector<KvEvent> events;
  };

  KvEventPublisherOptions options;
  void* context = nullptr;
  void* pub = nullptr;
  void* replay = nullptr;  // null without replay
  int wake_fd = -1;        // an eventfd publish() and the destructor write to wake the thread
  std::string endpoint;
  std::string replay_endpoint;

  std::mutex mutex;
  std::deque<Batch> queue;  // guarded by mutex
  bool stopping = false;    // guarded by mutex
  std::atomic<int64_t> dropped{0};

  // The sending thread's own.
  uint64_t next_sequence = 0;
  std::deque<std::pair<uint64_t, std::string>> kept;  // (sequence, payload) for replay
  bool drop_reported = false;
  std::thread thread;

  explicit Impl(KvEventPublisherOptions o) : options(std::move(o)) {}
  ~Impl();
  void open();
  void wake() const;
  void run();
  bool send_queued();
  void serve_replays();
};

void KvEventPublisher::Impl::open() {
  context = zmq_ctx_new();
  if (!context) throw Error("KV events: cannot create a ZeroMQ context: " + zmq_reason());
  pub = zmq_socket(context, ZMQ_PUB);
  if (!pub) throw Error("KV events: cannot create a PUB socket: " + zmq_reason());
  set_option(pub, ZMQ_SNDHWM, options.send_high_water_mark, "the send high-water mark");
  set_option(pub, ZMQ_LINGER, int(options.linger.count()), "the linger");
  if (binds(options.endpoint)) {
    if (zmq_bind(pub, options.endpoint.c_str()) != 0)
      throw Error("KV events: cannot bind " + options.endpoint + ": " + zmq_reason());
    endpoint = last_endpoint(pub);
  } else {
    if (zmq_connect(pub, options.endpoint.c_str()) != 0)
      throw Error("KV events: cannot connect to " + options.endpoint + ": " + zmq_reason());
    endpoint = options.endpoint;
  }
  if (!options.replay_endpoint.empty()) {
    replay = zmq_socket(context, ZMQ_ROUTER);
    if (!replay) throw Error("KV events: cannot create a ROUTER socket: " + zmq_reason());
    // Room for a whole replay, so a requester that reads slowly still gets every batch (a
    // ROUTER drops what does not fit); replies left unread at shutdown are not waited for.
    set_option(replay, ZMQ_SNDHWM, int(std::min<size_t>(options.replay_batches + 1, INT_MAX)),
               "the replay high-water mark");
    set_option(replay, ZMQ_LINGER, 0, "the replay linger");
    if (zmq_bind(replay, options.replay_endpoint.c_str()) != 0)
      throw Error("KV events: cannot bind " + options.replay_endpoint + ": " + zmq_reason());
    replay_endpoint = last_endpoint(replay);
  }
  wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) throw Error(std::string("KV events: cannot create an eventfd: ") + std::strerror(errno));
}

KvEventPublisher::Impl::~Impl() {
  if (replay) zmq_close(replay);
  if (pub) zmq_close(pub);
  if (context) zmq_ctx_term(context);  // waits for pub's queued messages, at most its linger
  if (wake_fd >= 0) ::close(wake_fd);
}

void KvEventPublisher::Impl::wake() const {
  uint64_t one = 1;
  // Adds to the eventfd's counter; never blocks, and cannot fail short of 2^64 - 1 wakes.
  [[maybe_unused]] ssize_t written = ::write(wake_fd, &one, sizeof one);
}

void KvEventPublisher::Impl::run() {
  zmq_pollitem_t items[2] = {{nullptr, wake_fd, ZMQ_POLLIN, 0}, {replay, 0, ZMQ_POLLIN, 0}};
  int n_items = replay ? 2 : 1;
  for (;;) {
    if (zmq_poll(items, n_items, -1) < 0) {
      if (zmq_errno() == EINTR) continue;
      std::fprintf(stderr, "pagoda: KV events: polling failed (%s); no more events are sent\n", zmq_reason().c_str());
      return;
    }
    if (items[0].revents & ZMQ_POLLIN) {
      uint64_t wakes;
      [[maybe_unused]] ssize_t n = ::read(wake_fd, &wakes, sizeof wakes);
    }
    bool stop = send_queued();
    if (replay && (items[1].revents & ZMQ_POLLIN)) serve_replays();
    if (stop) return;
  }
}

// Sends every queued batch; returns whether the publisher is stopping (everything queued
// before it stopped has then been sent).
bool KvEventPublisher::Impl::send_queued() {
  std::deque<Batch> batches;
  bool stop;
  {
    std::lock_guard lock(mutex);
    batches.swap(queue);
    stop = stopping;
  }
  for (const Batch& batch : batches) {
    std::string payload = encode_kv_event_batch(batch.ts, batch.events, options.data_parallel_rank);
    uint64_t sequence = next_sequence++;
    send_frames(pub, {options.topic, big_endian(sequence), payload});
    if (replay && options.replay_batches > 0) {
      if (kept.size() == options.replay_batches) kept.pop_front();
      kept.emplace_back(sequence, std::move(payload));
    }
  }
  if (!drop_reported && dropped.load(std::memory_order_relaxed) > 0) {
    drop_reported = true;
    std::fprintf(stderr,
                 "pagoda: KV events: batches dropped with %zu waiting to be sent; routers no longer "
                 "see all of this replica's cache\n",
                 options.max_queued_batches);
  }
  return stop;
}

// Answers every waiting replay request, as vLLM's publisher does: a request is [identity,
// empty, start]; anything else is ignored.
void KvEventPublisher::Impl::serve_replays() {
  std::vector<std::string> frames;
  while (receive_frames(replay, frames)) {
    if (frames.size() != 3) continue;
    const std::string& identity = frames[0];
    uint64_t start = read_big_endian(frames[2]);
    for (const auto& [sequence, payload] : kept) {
      if (sequence >= start) send_frames(replay, {identity, "", big_endian(sequence), payload});
    }
    send_frames(replay, {identity, "", kReplayEnd, ""});
  }
}

KvEventPublisher::KvEventPublisher(KvEventPublisherOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {
  impl_->open();
  impl_->thread = std::thread([impl = impl_.get()] { impl->run(); });
}

KvEventPublisher::~KvEventPublisher() {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->stopping = true;
  }
  impl_->wake();
  impl_->thread.join();
}

void KvEventPublisher::publish(std::vector<KvEvent> batch) {
  if (batch.empty()) return;
  double ts = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  bool was_empty;
  {
    std::lock_guard lock(impl_->mutex);
    if (impl_->queue.size() >= impl_->options.max_queued_batches) {
      impl_->dropped.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    was_empty = impl_->queue.empty();
    impl_->queue.push_back({ts, std::move(batch)});
  }
  // A queue that was not empty has a wake pending that the thread has not yet acted on.
  if (was_empty) impl_->wake();
}

const std::string& KvEventPublisher::endpoint() const { return impl_->endpoint; }

const std::string& KvEventPublisher::replay_endpoint() const { return impl_->replay_endpoint; }

int64_t KvEventPublisher::dropped_batches() const { return impl_->dropped.load(std::memory_order_relaxed); }

}  // namespace pagoda
