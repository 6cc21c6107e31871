// pagoda-server's WorkerPool (the blocking handlers' threads): every task runs, never more than the
// cap at once, shutdown waits for them all, and the worker threads end once idle.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "examples/server/worker_pool.h"

namespace pagoda::server {
namespace {

int process_threads() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

TEST(WorkerPool, RunsEveryConnectionWithAtMostTheCapAtOnceAndEndsItsThreads) {
  std::thread([] {}).join();  // runtimes that start a helper thread with the first thread (TSan) do so now
  const int idle = process_threads();
  std::atomic<int> running{0}, peak{0}, done{0};
  {
    WorkerPool pool(4);
    for (int i = 0; i < 64; ++i) {
      pool.enqueue([&] {
        const int now = ++running;
        int seen = peak.load();
        while (now > seen && !peak.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        --running;
        ++done;
      });
    }
    pool.shutdown();
    EXPECT_EQ(done.load(), 64) << "shutdown returned before every task ran";
  }
  EXPECT_GE(peak.load(), 1);
  EXPECT_LE(peak.load(), 4);
  // The workers end once no task waits (a bound, not a speed: they only have to return).
  for (int i = 0; i < 500 && process_threads() > idle; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(process_threads(), idle);
}

TEST(WorkerPool, ConnectionsBeyondTheCapWaitAndRunInOrder) {
  std::atomic<bool> release{false};
  std::vector<int> order;
  std::mutex order_mutex;
  WorkerPool pool(1);
  pool.enqueue([&] {
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  for (int i = 0; i < 5; ++i) {
    pool.enqueue([&, i] {
      std::lock_guard lock(order_mutex);
      order.push_back(i);
    });
  }
  {
    std::lock_guard lock(order_mutex);
    EXPECT_TRUE(order.empty()) << "a task ran beside the one holding the only worker";
  }
  release = true;
  pool.shutdown();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
}

}  // namespace
}  // namespace pagoda::server
