// The KV-events publisher as a router sees it: a SUB socket and a replay DEALER on loopback,
// payloads decoded with msgpack-cxx's own unpacker (and one checked against bytes written by
// hand from msgpack's spec), so the encoder's code is not what judges its output.

#include "engine/events/kv_event_publisher.h"

#include <gtest/gtest.h>
#include <zmq.h>

#include <chrono>
#include <msgpack.hpp>
#include <optional>
#include <string>
#include <vector>

#include "pagoda/error.h"

namespace pagoda {
namespace {

using namespace std::chrono_literals;
using namespace std::string_literals;
using Frames = std::vector<std::string>;

// A receive that outlasts this has failed; no test waits for it unless something is broken.
constexpr int kReceiveDeadlineMs = 10'000;

class Context {
 public:
  Context() : context_(zmq_ctx_new()) {}
  ~Context() { zmq_ctx_term(context_); }
  void* get() const { return context_; }

 private:
  void* context_;
};

class Socket {
 public:
  Socket(const Context& context, int type) : socket_(zmq_socket(context.get(), type)) {
    int zero = 0;
    zmq_setsockopt(socket_, ZMQ_LINGER, &zero, sizeof zero);
    set_receive_deadline(kReceiveDeadlineMs);
  }
  ~Socket() { zmq_close(socket_); }
  void* get() const { return socket_; }

  void set_receive_deadline(int ms) { zmq_setsockopt(socket_, ZMQ_RCVTIMEO, &ms, sizeof ms); }

  // Binds to `endpoint` (a port of "*": any free one) and returns the endpoint as bound.
  std::string bind(const std::string& endpoint) {
    EXPECT_EQ(zmq_bind(socket_, endpoint.c_str()), 0) << zmq_strerror(zmq_errno());
    char bound[256] = {};
    size_t size = sizeof bound;
    zmq_getsockopt(socket_, ZMQ_LAST_ENDPOINT, bound, &size);
    return bound;
  }

  void send(const Frames& frames) {
    for (size_t i = 0; i < frames.size(); ++i)
      zmq_send(socket_, frames[i].data(), frames[i].size(), i + 1 < frames.size() ? ZMQ_SNDMORE : 0);
  }

  // The next message's frames; none when the receive deadline passed first.
  std::optional<Frames> receive() {
    Frames frames;
    for (;;) {
      zmq_msg_t frame;
      zmq_msg_init(&frame);
      if (zmq_msg_recv(&frame, socket_, 0) < 0) {
        zmq_msg_close(&frame);
        return std::nullopt;
      }
      frames.emplace_back(static_cast<const char*>(zmq_msg_data(&frame)), zmq_msg_size(&frame));
      bool more = zmq_msg_more(&frame);
      zmq_msg_close(&frame);
      if (!more) return frames;
    }
  }

 private:
  void* socket_;
};

std::string big_endian(uint64_t value) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[size_t(7 - i)] = char(uint8_t(value >> (8 * i)));
  return bytes;
}

uint64_t sequence_of(const Frames& message) {
  EXPECT_EQ(message.at(1).size(), 8u);
  uint64_t value = 0;
  for (char c : message.at(1)) value = (value << 8) | uint8_t(c);
  return value;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Publishes AllBlocksCleared probes until `sub` hears one, then reads the probes still on their
// way: a subscription takes a moment to reach a PUB socket, which drops whatever no subscriber
// has asked for yet. Returns the sequence number the next batch will carry.
uint64_t await_subscription(KvEventPublisher& publisher, Socket& sub) {
  auto deadline = std::chrono::steady_clock::now() + 20s;
  uint64_t sent = 0;
  sub.set_receive_deadline(50);
  for (;;) {
    publisher.publish({KvAllBlocksCleared{}});
    ++sent;
    if (auto message = sub.receive()) {
      sub.set_receive_deadline(kReceiveDeadlineMs);
      for (uint64_t seq = sequence_of(*message); seq + 1 < sent; seq = sequence_of(*message)) {
        message = sub.receive();
        if (!message) {
          ADD_FAILURE() << "probe " << seq + 1 << " never arrived";
          return sent;
        }
      }
      return sent;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "the subscription never reached the publisher";
      return sent;
    }
  }
}

const msgpack::object& element(const msgpack::object& array, size_t i) {
  EXPECT_EQ(array.type, msgpack::type::ARRAY);
  EXPECT_LT(i, array.via.array.size);
  return array.via.array.ptr[i];
}

std::string as_string(const msgpack::object& o) {
  EXPECT_EQ(o.type, msgpack::type::STR);
  return std::string(o.via.str.ptr, o.via.str.size);
}

std::vector<uint64_t> as_unsigned_list(const msgpack::object& o) {
  std::vector<uint64_t> values;
  EXPECT_EQ(o.type, msgpack::type::ARRAY);
  for (uint32_t i = 0; i < o.via.array.size; ++i) {
    EXPECT_EQ(o.via.array.ptr[i].type, msgpack::type::POSITIVE_INTEGER);
    values.push_back(o.via.array.ptr[i].via.u64);
  }
  return values;
}

std::vector<uint64_t> lows(const std::vector<PageHash>& hashes) {
  std::vector<uint64_t> values;
  for (const PageHash& h : hashes) values.push_back(h.low);
  return values;
}

std::vector<uint64_t> widened(const std::vector<int32_t>& tokens) { return {tokens.begin(), tokens.end()}; }

// Checks `o` is vLLM's BlockStored for `e`, field by field.
void expect_block_stored(const msgpack::object& o, const KvBlockStored& e, const std::string& medium) {
  ASSERT_EQ(o.type, msgpack::type::ARRAY);
  ASSERT_EQ(o.via.array.size, 8u);
  EXPECT_EQ(as_string(element(o, 0)), "BlockStored");
  EXPECT_EQ(as_unsigned_list(element(o, 1)), lows(e.hashes));
  if (e.parent) {
    ASSERT_EQ(element(o, 2).type, msgpack::type::POSITIVE_INTEGER);
    EXPECT_EQ(element(o, 2).via.u64, e.parent->low);
  } else {
    EXPECT_EQ(element(o, 2).type, msgpack::type::NIL);
  }
  EXPECT_EQ(as_unsigned_list(element(o, 3)), widened(e.token_ids));
  ASSERT_EQ(element(o, 4).type, msgpack::type::POSITIVE_INTEGER);
  EXPECT_EQ(element(o, 4).via.u64, uint64_t(e.block_size));
  EXPECT_EQ(element(o, 5).type, msgpack::type::NIL);  // lora_id
  EXPECT_EQ(as_string(element(o, 6)), medium);
  EXPECT_EQ(element(o, 7).type, msgpack::type::NIL);  // lora_name
}

void expect_block_removed(const msgpack::object& o, const KvBlockRemoved& e, const std::string& medium) {
  ASSERT_EQ(o.type, msgpack::type::ARRAY);
  ASSERT_EQ(o.via.array.size, 3u);
  EXPECT_EQ(as_string(element(o, 0)), "BlockRemoved");
  EXPECT_EQ(as_unsigned_list(element(o, 1)), lows(e.hashes));
  EXPECT_EQ(as_string(element(o, 2)), medium);
}

void expect_all_blocks_cleared(const msgpack::object& o) {
  ASSERT_EQ(o.type, msgpack::type::ARRAY);
  ASSERT_EQ(o.via.array.size, 1u);
  EXPECT_EQ(as_string(element(o, 0)), "AllBlocksCleared");
}

// The batch's envelope: [ts, events, data_parallel_rank]; returns the events.
const msgpack::object& expect_batch(const msgpack::object& batch, double earliest, double latest,
                                    int32_t data_parallel_rank, uint32_t n_events) {
  EXPECT_EQ(batch.type, msgpack::type::ARRAY);
  EXPECT_EQ(batch.via.array.size, 3u);
  EXPECT_EQ(element(batch, 0).type, msgpack::type::FLOAT64);
  EXPECT_GE(element(batch, 0).via.f64, earliest);
  EXPECT_LE(element(batch, 0).via.f64, latest);
  EXPECT_EQ(element(batch, 2).as<int32_t>(), data_parallel_rank);
  const msgpack::object& events = element(batch, 1);
  EXPECT_EQ(events.type, msgpack::type::ARRAY);
  EXPECT_EQ(events.via.array.size, n_events);
  return events;
}

PageHash hash(uint64_t low) { return {low, ~low}; }

// Two blocks of four tokens at a sequence's start, one hash past 2^63 (an unsigned 64-bit
// integer on the wire, not a negative one), and a token past one byte.
KvBlockStored first_blocks() {
  return {.hashes = {hash(0x8000'0000'0000'0005), hash(7)},
          .parent = std::nullopt,
          .token_ids = {1, 2, 3, 300, 5, 6, 7, 8},
          .block_size = 4,
          .group = 0,
          .tier = KvTier::Ram};
}

KvBlockStored next_block_on_disk() {
  return {.hashes = {hash(9)},
          .parent = hash(7),
          .token_ids = {9, 10, 11, 12},
          .block_size = 4,
          .group = 1,
          .tier = KvTier::Disk};
}

TEST(KvEventPublisher, SubscribersReceiveEveryBatchInOrderWithRisingSequenceNumbersInVllmsShape) {
  Context context;
  Socket sub(context, ZMQ_SUB);
  std::string topic = "kv@pod-a@tiny";
  zmq_setsockopt(sub.get(), ZMQ_SUBSCRIBE, topic.data(), topic.size());
  // The router binds and the replica connects, as llm-d's indexer deploys it; without a '*' in
  // it the endpoint is connected to, vLLM's rule.
  std::string endpoint = sub.bind("tcp://127.0.0.1:*");
  KvEventPublisher publisher({.endpoint = endpoint, .topic = topic, .data_parallel_rank = 3});
  EXPECT_EQ(publisher.endpoint(), endpoint);

  uint64_t next = await_subscription(publisher, sub);

  KvBlockRemoved evicted{.hashes = {hash(0x8000'0000'0000'0005)}, .group = 0, .tier = KvTier::Ram};
  double before = now_seconds();
  publisher.publish({first_blocks(), KvBlockRemoved{.hashes = {hash(11), hash(12)}, .tier = KvTier::Disk}});
  publisher.publish({next_block_on_disk()});
  publisher.publish({evicted, KvAllBlocksCleared{}});
  double after = now_seconds();

  std::vector<Frames> messages;
  for (int i = 0; i < 3; ++i) {
    auto message = sub.receive();
    ASSERT_TRUE(message) << "batch " << i << " never arrived";
    ASSERT_EQ(message->size(), 3u);
    EXPECT_EQ(message->at(0), topic);
    EXPECT_EQ(sequence_of(*message), next + uint64_t(i));
    messages.push_back(*message);
  }

  msgpack::object_handle first = msgpack::unpack(messages[0][2].data(), messages[0][2].size());
  const msgpack::object& first_events = expect_batch(first.get(), before, after, 3, 2);
  expect_block_stored(first_events.via.array.ptr[0], first_blocks(), "GPU");
  expect_block_removed(first_events.via.array.ptr[1], {.hashes = {hash(11), hash(12)}}, "DISK");

  msgpack::object_handle second = msgpack::unpack(messages[1][2].data(), messages[1][2].size());
  expect_block_stored(expect_batch(second.get(), before, after, 3, 1).via.array.ptr[0], next_block_on_disk(), "DISK");

  msgpack::object_handle third = msgpack::unpack(messages[2][2].data(), messages[2][2].size());
  const msgpack::object& third_events = expect_batch(third.get(), before, after, 3, 2);
  expect_block_removed(third_events.via.array.ptr[0], evicted, "GPU");
  expect_all_blocks_cleared(third_events.via.array.ptr[1]);
}

// Replay requests as a DEALER sends them ([empty, start]; a REQ socket adds the empty frame
// itself but then takes only the first reply); the replies, each [empty, sequence, payload],
// up to the end marker, which is returned too.
std::vector<Frames> replay_from(Socket& dealer, uint64_t start) {
  dealer.send({"", big_endian(start)});
  std::vector<Frames> replies;
  for (;;) {
    auto reply = dealer.receive();
    if (!reply) {
      ADD_FAILURE() << "the replay from " << start << " never ended";
      return replies;
    }
    replies.push_back(*reply);
    if (reply->size() == 3 && reply->at(2).empty()) return replies;
  }
}

// The block size of the one BlockStored in a replayed batch, which names the batch here.
int64_t block_size_in(const Frames& reply) {
  msgpack::object_handle batch = msgpack::unpack(reply.at(2).data(), reply.at(2).size());
  return element(element(element(batch.get(), 1), 0), 4).as<int64_t>();
}

KvBlockStored block_of_size(int32_t block_size) {
  return {.hashes = {hash(uint64_t(block_size))},
          .token_ids = std::vector<int32_t>(size_t(block_size), 1),
          .block_size = block_size};
}

TEST(KvEventPublisher, ReplayAnswersFromTheRequestedSequenceNumberThenSendsTheEndMarker) {
  Context context;
  KvEventPublisher publisher({.endpoint = "tcp://127.0.0.1:*", .replay_endpoint = "tcp://127.0.0.1:*"});
  EXPECT_TRUE(publisher.endpoint().starts_with("tcp://127.0.0.1:")) << publisher.endpoint();
  EXPECT_NE(publisher.endpoint().back(), '*');
  for (int32_t size = 1; size <= 4; ++size) publisher.publish({block_of_size(size)});

  Socket dealer(context, ZMQ_DEALER);
  ASSERT_EQ(zmq_connect(dealer.get(), publisher.replay_endpoint().c_str()), 0);
  const std::string end_marker(8, char(0xff));

  std::vector<Frames> from_two = replay_from(dealer, 2);
  ASSERT_EQ(from_two.size(), 3u);
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_EQ(from_two[i].size(), 3u);
    EXPECT_EQ(from_two[i][0], "");
    EXPECT_EQ(sequence_of(from_two[i]), 2 + i);
    EXPECT_EQ(block_size_in(from_two[i]), int64_t(3 + i));
  }
  EXPECT_EQ(from_two[2], (Frames{"", end_marker, ""}));

  std::vector<Frames> from_zero = replay_from(dealer, 0);
  ASSERT_EQ(from_zero.size(), 5u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(sequence_of(from_zero[i]), i);

  EXPECT_EQ(replay_from(dealer, 4), (std::vector<Frames>{{"", end_marker, ""}}));
}

TEST(KvEventPublisher, ReplayKeepsOnlyTheNewestBatches) {
  Context context;
  KvEventPublisher publisher(
      {.endpoint = "tcp://127.0.0.1:*", .replay_endpoint = "tcp://127.0.0.1:*", .replay_batches = 2});
  for (int32_t size = 1; size <= 5; ++size) publisher.publish({block_of_size(size)});
  Socket dealer(context, ZMQ_DEALER);
  ASSERT_EQ(zmq_connect(dealer.get(), publisher.replay_endpoint().c_str()), 0);
  std::vector<Frames> replies = replay_from(dealer, 0);
  ASSERT_EQ(replies.size(), 3u);
  EXPECT_EQ(sequence_of(replies[0]), 3u);
  EXPECT_EQ(sequence_of(replies[1]), 4u);
}

TEST(KvEventPublisher, BindingATakenEndpointThrowsNamingItAndTheReason) {
  Context context;
  Socket holder(context, ZMQ_PUB);
  std::string taken = holder.bind("tcp://127.0.0.1:*");
  std::string port = taken.substr(taken.rfind(':') + 1);
  Socket wildcard_holder(context, ZMQ_PUB);
  std::string wildcard_taken = wildcard_holder.bind("tcp://*:*");
  std::string wildcard = "tcp://*:" + wildcard_taken.substr(wildcard_taken.rfind(':') + 1);

  auto message_of = [](const KvEventPublisherOptions& options) -> std::string {
    try {
      KvEventPublisher publisher(options);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(message_of({.endpoint = wildcard}), "KV events: cannot bind " + wildcard + ": Address already in use");
  EXPECT_EQ(message_of({.endpoint = "tcp://127.0.0.1:*", .replay_endpoint = taken}),
            "KV events: cannot bind " + taken + ": Address already in use");
  EXPECT_EQ(message_of({.endpoint = "nonsense"}).rfind("KV events: cannot connect to nonsense: ", 0), 0u);
}

// A replica whose router is gone: the connection never comes up, so every batch waits in the
// socket's queue when the publisher is destroyed.
TEST(KvEventPublisher, DestroyingItWithBatchesQueuedNeitherHangsNorCrashes) {
  std::string nobody;
  {
    Context context;
    Socket released(context, ZMQ_PUB);
    nobody = released.bind("tcp://127.0.0.1:*");
  }
  auto start = std::chrono::steady_clock::now();
  {
    KvEventPublisher publisher({.endpoint = nobody, .replay_endpoint = "tcp://127.0.0.1:*", .linger = 200ms});
    KvBlockStored big = first_blocks();
    big.token_ids.assign(4096, 17);
    for (int i = 0; i < 2000; ++i) publisher.publish({big, KvAllBlocksCleared{}});
  }
  // The linger bounds the wait; this only catches a hang, far beyond it.
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
}

TEST(KvEventPublisher, DestroyingItSendsWhatIsStillQueued) {
  Context context;
  Socket sub(context, ZMQ_SUB);
  zmq_setsockopt(sub.get(), ZMQ_SUBSCRIBE, "", 0);
  std::string endpoint = sub.bind("tcp://127.0.0.1:*");
  uint64_t next;
  {
    KvEventPublisher publisher({.endpoint = endpoint});
    next = await_subscription(publisher, sub);
    for (int32_t size = 1; size <= 50; ++size) publisher.publish({block_of_size(size)});
  }
  for (int32_t size = 1; size <= 50; ++size) {
    auto message = sub.receive();
    ASSERT_TRUE(message) << "batch " << size << " was lost";
    EXPECT_EQ(sequence_of(*message), next + uint64_t(size - 1));
    EXPECT_EQ(block_size_in(*message), size);
  }
}

TEST(KvEventPublisher, PublishDropsABatchRatherThanWaitWhenTheQueueIsFull) {
  KvEventPublisher publisher({.endpoint = "tcp://127.0.0.1:*", .max_queued_batches = 0});
  publisher.publish({KvAllBlocksCleared{}});
  publisher.publish({KvAllBlocksCleared{}});
  publisher.publish({});  // empty: not a batch at all
  EXPECT_EQ(publisher.dropped_batches(), 2);
}

// Bytes written by hand from msgpack's spec, as msgspec encodes vLLM's structs: fixarray 0x9N,
// float64 0xcb, fixstr 0xa0|n, uint64 0xcf, uint16 0xcd, nil 0xc0, positive fixint as itself.
TEST(KvEventPublisher, EncodesABatchByteForByteAsMsgspecDoes) {
  KvBlockStored stored{.hashes = {hash(0x8000'0000'0000'0005)},
                       .parent = hash(7),
                       .token_ids = {1, 300},
                       .block_size = 2,
                       .tier = KvTier::Ram};
  KvBlockRemoved removed{.hashes = {hash(7)}, .tier = KvTier::Disk};
  std::vector<KvEvent> events = {stored, removed, KvAllBlocksCleared{}};
  std::string expected =
      "\x93"                                  // [ts, events, data_parallel_rank]
      "\xcb\x3f\xf8\x00\x00\x00\x00\x00\x00"  // 1.5
      "\x93"                                  // three events
      "\x98"                                  // BlockStored: eight fields
      "\xab"
      "BlockStored"
      "\x91\xcf\x80\x00\x00\x00\x00\x00\x00\x05"  // [2^63 + 5]
      "\x07"                                      // parent 7
      "\x92\x01\xcd\x01\x2c"                      // [1, 300]
      "\x02"                                      // block_size
      "\xc0"                                      // lora_id
      "\xa3"
      "GPU"
      "\xc0"  // lora_name
      "\x93"  // BlockRemoved: three fields
      "\xac"
      "BlockRemoved"
      "\x91\x07"
      "\xa4"
      "DISK"
      "\x91"  // AllBlocksCleared: the tag alone
      "\xb0"
      "AllBlocksCleared"
      "\x05"s;  // data_parallel_rank
  EXPECT_EQ(encode_kv_event_batch(1.5, events, 5), expected);
}

}  // namespace
}  // namespace pagoda
