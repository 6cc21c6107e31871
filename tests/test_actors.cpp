// The actor runtime under stress: mailboxes with many producers, request/reply, and the
// page-pool actor serving allocations from several threads at once.

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "actors/actor.h"
#include "actors/mailbox.h"
#include "actors/page_pool_actor.h"
#include "actors/reply.h"

namespace pagoda {
namespace {

TEST(Mailbox, ManyProducersLoseNothingAndKeepEachProducersOrder) {
  Mailbox<std::pair<int, int>> box;
  constexpr int kProducers = 8, kEach = 20000;
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (int i = 0; i < kEach; ++i) box.post({p, i});
    });
  }
  std::vector<int> next(kProducers, 0);
  for (int n = 0; n < kProducers * kEach; ++n) {
    const auto [p, i] = box.receive();
    ASSERT_EQ(i, next[p]) << "producer " << p << " out of order";
    ++next[p];
  }
  for (auto& t : producers) t.join();
  EXPECT_FALSE(box.try_receive());
  for (int p = 0; p < kProducers; ++p) EXPECT_EQ(next[p], kEach);
}

TEST(Mailbox, ReceiveForTimesOut) {
  Mailbox<int> box;
  EXPECT_FALSE(box.receive_for(std::chrono::milliseconds(5)));
  box.post(7);
  EXPECT_EQ(box.receive_for(std::chrono::milliseconds(5)), 7);
}

TEST(Reply, CarriesTheValueAcrossThreads) {
  for (int i = 0; i < 1000; ++i) {
    auto reply = Reply<std::vector<int>>::make();
    std::thread answerer([&] { reply->set({i, i + 1}); });
    EXPECT_EQ(reply->wait(), (std::vector<int>{i, i + 1}));
    answerer.join();
  }
}

// A counter actor: adds what it is sent, answers queries, stops on a negative number.
struct Query {
  std::shared_ptr<Reply<long>> reply;
};
using CounterMessage = std::variant<long, Query>;

class Counter : public Actor<CounterMessage> {
  void handle(CounterMessage m) override {
    if (auto* n = std::get_if<long>(&m)) {
      if (*n < 0) {
        stop();
      } else {
        total_ += *n;
      }
    } else {
      std::get<Query>(m).reply->set(total_);
    }
  }
  long total_ = 0;
};

TEST(Actor, OwnsItsStateAndStopsCleanly) {
  Counter counter;
  counter.start();
  std::vector<std::thread> senders;
  for (int t = 0; t < 4; ++t) {
    senders.emplace_back([&] {
      for (int i = 1; i <= 1000; ++i) counter.post(long(i));
    });
  }
  for (auto& s : senders) s.join();
  // Messages from different threads may be read in any order, so the query can overtake
  // numbers still queued by the senders: ask until everything has been counted.
  const long expected = 4L * 1000 * 1001 / 2;
  long total = 0;
  for (int attempt = 0; attempt < 10000 && total != expected; ++attempt) {
    auto reply = Reply<long>::make();
    counter.post(Query{reply});
    total = reply->wait();
    ASSERT_LE(total, expected);
  }
  EXPECT_EQ(total, expected);
  counter.post(-1L);
  counter.join();
}

TEST(PagePoolActor, ServesManyThreadsWithExactAccounting) {
  PagePool pool(KvLayout{1, 1, 8, 4}, 64);
  MetricsBoard metrics;
  PagePoolActor actor(pool, metrics);
  actor.start();
  std::atomic<int> granted{0}, refused{0};
  std::vector<std::thread> clients;
  std::vector<std::vector<int32_t>> held(4);
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        auto pages = actor.allocate(1 + i % 5, 0, PageRequester::Decode);
        if (!pages) {
          ++refused;
          continue;
        }
        ++granted;
        held[t].insert(held[t].end(), pages->begin(), pages->end());
        if (held[t].size() > 12) actor.release(std::exchange(held[t], {}));
      }
    });
  }
  for (auto& c : clients) c.join();
  std::set<int32_t> all;
  for (auto& h : held) {
    for (int32_t p : h) EXPECT_TRUE(all.insert(p).second) << "page " << p << " granted twice";
  }
  // keep_free holds back the last pages.
  auto none = actor.allocate(64, 1, PageRequester::Decode);
  EXPECT_FALSE(none);
  for (auto& h : held) actor.release(std::move(h));
  actor.post(Stop{});
  actor.join();
  actor.drain();
  EXPECT_GT(granted.load(), 0);
  EXPECT_EQ(pool.free_pages(), pool.capacity());
  EXPECT_EQ(metrics.pages_used.load(), 0);
}

}  // namespace
}  // namespace pagoda
