// The KV events an engine publishes (EngineConfig::kv_events_endpoint), as a router replays them
// from the replay socket and decodes them with msgpack-cxx: first AllBlocksCleared, then
// exactly the blocks each tier stored and removed, in order — every removal of a block stored
// before, every stored block one of the requests' own (its hash, parent and tokens as the
// prefix-hash chain computed here independently says), and what is left at the end exactly
// what the engine's counters say each tier holds.

#include <gtest/gtest.h>
#include <zmq.h>

#include <filesystem>
#include <map>
#include <msgpack.hpp>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "engine/kv/kv_layout.h"
#include "engine/kv/prefix_cache.h"
#include "pagoda/engine.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

using namespace std::chrono_literals;
using Frames = std::vector<std::string>;
constexpr int kTokensPerPage = 4;

// A loopback port nothing listens on now: bound by ZeroMQ to any free one, then let go.
std::string free_endpoint(void* context) {
  void* probe = zmq_socket(context, ZMQ_PUB);
  EXPECT_EQ(zmq_bind(probe, "tcp://127.0.0.1:*"), 0);
  char bound[256] = {};
  size_t size = sizeof bound;
  zmq_getsockopt(probe, ZMQ_LAST_ENDPOINT, bound, &size);
  zmq_close(probe);
  return bound;
}

std::optional<Frames> receive(void* socket) {
  Frames frames;
  for (;;) {
    zmq_msg_t frame;
    zmq_msg_init(&frame);
    if (zmq_msg_recv(&frame, socket, 0) < 0) {
      zmq_msg_close(&frame);
      return std::nullopt;
    }
    frames.emplace_back(static_cast<const char*>(zmq_msg_data(&frame)), zmq_msg_size(&frame));
    const bool more = zmq_msg_more(&frame);
    zmq_msg_close(&frame);
    if (!more) return frames;
  }
}

// Every batch the replay socket keeps, oldest first: their payloads.
std::vector<std::string> replay_all(void* context, const std::string& endpoint) {
  void* dealer = zmq_socket(context, ZMQ_DEALER);
  const int deadline_ms = 10'000, zero = 0;
  zmq_setsockopt(dealer, ZMQ_RCVTIMEO, &deadline_ms, sizeof deadline_ms);
  zmq_setsockopt(dealer, ZMQ_LINGER, &zero, sizeof zero);
  EXPECT_EQ(zmq_connect(dealer, endpoint.c_str()), 0);
  const std::string start(8, '\0');
  zmq_send(dealer, "", 0, ZMQ_SNDMORE);
  zmq_send(dealer, start.data(), start.size(), 0);
  std::vector<std::string> payloads;
  for (;;) {
    const auto reply = receive(dealer);
    if (!reply) {
      ADD_FAILURE() << "the replay never ended";
      break;
    }
    if (reply->size() != 3 || reply->at(2).empty()) break;  // the end marker
    payloads.push_back(reply->at(2));
  }
  zmq_close(dealer);
  return payloads;
}

// A block as the chain names it: its parent's hash (none for a sequence's first) and tokens.
struct Block {
  std::optional<uint64_t> parent;
  std::vector<uint64_t> tokens;
};

// Every full block of `tokens`, by the low 64 bits of its hash (what the events carry).
void add_blocks(const std::vector<int32_t>& tokens, const PageHash& seed, std::map<uint64_t, Block>& blocks) {
  PageHash previous = seed;
  for (size_t b = 0; (b + 1) * kTokensPerPage <= tokens.size(); ++b) {
    const std::span<const int32_t> block(tokens.data() + b * kTokensPerPage, kTokensPerPage);
    const PageHash hash = chain_page_hash(previous, block);
    blocks[hash.low] = {b == 0 ? std::nullopt : std::optional(previous.low), {block.begin(), block.end()}};
    previous = hash;
  }
}

std::vector<uint64_t> unsigned_list(const msgpack::object& o) {
  std::vector<uint64_t> values;
  for (uint32_t i = 0; i < o.via.array.size; ++i) values.push_back(o.via.array.ptr[i].as<uint64_t>());
  return values;
}

TEST(KvEventsFromTheEngine, ARouterReplaysExactlyTheBlocksEachTierStoredAndRemoved) {
  void* context = zmq_ctx_new();
  const std::string replay = free_endpoint(context);
  const std::string dir = test::scratch_path("kv-events-disk");
  std::filesystem::remove_all(dir);
  EngineConfig c;
  c.model_path = test::tiny_gqa_model();
  c.threads = 1;
  c.kv_pages = 40;  // small: the RAM tier evicts
  c.tokens_per_page = kTokensPerPage;
  c.max_running = 4;
  c.kv_disk_path = dir;
  c.kv_disk_bytes = 30 * (96 + 16 + 512);         // small: the disk tier evicts too
  c.kv_events_endpoint = free_endpoint(context);  // connected to: nobody listens, which is fine
  c.kv_events_replay_endpoint = replay;
  Engine engine(c);

  std::mt19937 rng(29);
  std::map<uint64_t, Block> blocks;
  const PageHash seed =
      prefix_seed(KvLayout::for_model(test::tiny_gqa_config(), kTokensPerPage, c.kv_cache_type), "", 0);
  // Each request's pages written before the next one's: on a loaded machine the pool would
  // otherwise let some go before their turn to be written, and the disk tier might never fill.
  auto settle = [&] {
    test::expect_engine_idle(engine);
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (engine.metrics().kv_disk_write_backlog > 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(1ms);
  };
  for (int conversation = 0; conversation < 5; ++conversation) {
    std::vector<int32_t> prompt;
    for (int i = 0; i < 41; ++i) prompt.push_back(int32_t(3 + rng() % 990));
    for (int turn = 0; turn < 2; ++turn) {
      const Completion done = test::run_all(engine, {test::greedy_request(prompt, 8)})[0];
      std::vector<int32_t> all = prompt;
      all.insert(all.end(), done.token_ids.begin(), done.token_ids.end());
      add_blocks(all, seed, blocks);
      settle();
    }
  }
  const EngineMetrics m = engine.metrics();
  // The publisher's thread sends the last batches a moment after the pool made them: replayed
  // until two replays 50 ms apart agree.
  std::vector<std::string> payloads = replay_all(context, replay);
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::this_thread::sleep_for(50ms);
    std::vector<std::string> again = replay_all(context, replay);
    if (!again.empty() && again.size() == payloads.size()) break;
    payloads = std::move(again);
  }
  ASSERT_FALSE(payloads.empty());

  std::map<std::string, std::set<uint64_t>> held;  // by medium
  std::map<std::string, int64_t> removed;
  bool first = true;
  for (const std::string& payload : payloads) {
    const msgpack::object_handle batch = msgpack::unpack(payload.data(), payload.size());
    const msgpack::object& events = batch.get().via.array.ptr[1];
    for (uint32_t i = 0; i < events.via.array.size; ++i) {
      const msgpack::object& e = events.via.array.ptr[i];
      const std::string tag = e.via.array.ptr[0].as<std::string>();
      if (first) {
        EXPECT_EQ(tag, "AllBlocksCleared") << "a restarted replica first says its old blocks are gone";
        first = false;
        continue;
      }
      if (tag == "BlockStored") {
        const std::vector<uint64_t> hashes = unsigned_list(e.via.array.ptr[1]);
        const std::vector<uint64_t> tokens = unsigned_list(e.via.array.ptr[3]);
        EXPECT_EQ(e.via.array.ptr[4].as<int64_t>(), kTokensPerPage);
        const std::string medium = e.via.array.ptr[6].as<std::string>();
        std::optional<uint64_t> parent;
        if (e.via.array.ptr[2].type != msgpack::type::NIL) parent = e.via.array.ptr[2].as<uint64_t>();
        ASSERT_EQ(tokens.size(), hashes.size() * kTokensPerPage);
        for (size_t b = 0; b < hashes.size(); ++b) {
          const auto known = blocks.find(hashes[b]);
          ASSERT_NE(known, blocks.end()) << "a block no request had";
          EXPECT_EQ(known->second.parent, parent);
          EXPECT_EQ(known->second.tokens, std::vector<uint64_t>(tokens.begin() + ptrdiff_t(b * kTokensPerPage),
                                                                tokens.begin() + ptrdiff_t((b + 1) * kTokensPerPage)));
          EXPECT_TRUE(held[medium].insert(hashes[b]).second) << medium << " stored a block it held";
          parent = hashes[b];
        }
      } else if (tag == "BlockRemoved") {
        const std::string medium = e.via.array.ptr[2].as<std::string>();
        for (uint64_t h : unsigned_list(e.via.array.ptr[1])) {
          EXPECT_EQ(held[medium].erase(h), 1u) << medium << " removed a block it did not hold";
          ++removed[medium];
        }
      } else {
        ADD_FAILURE() << "unexpected event " << tag;
      }
    }
  }
  // Idle: every block the pool names is cached, and every file the index holds is this model's.
  EXPECT_EQ(int64_t(held["GPU"].size()), m.kv_pages_cached);
  EXPECT_EQ(removed["GPU"], m.kv_ram_evictions);
  EXPECT_GT(removed["GPU"], 0);
  EXPECT_EQ(int64_t(held["DISK"].size()), m.kv_disk_pages);
  EXPECT_EQ(removed["DISK"], m.kv_disk_evictions);
  EXPECT_GT(removed["DISK"], 0);
  zmq_ctx_term(context);
}

}  // namespace
}  // namespace pagoda
