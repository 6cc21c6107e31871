#pragma once
// httplib's task queue for pagoda-server: a thread per connection, up to a cap, started when a
// connection comes and ended when no connection waits. Each connection holds a worker for its
// whole life (a stream for all its tokens), so the cap is sized for connections, not cores;
// connections beyond it wait in order.
//
// Why threads end instead of idling in a fixed pool: mimalloc keeps a heap per thread, and an
// idle thread never hands back what its last connection used (its free pages are returned
// only when that thread calls the allocator again). Measured on s15m with 300 workers: ≈ 250 KB
// per worker, 74 MB after one pass of 256 streams and 102 MB after six. A thread that ends
// gives its heap back; a new thread costs microseconds against a request's milliseconds.

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>

#include <httplib.h>

namespace pagoda::server {

class WorkerPool : public httplib::TaskQueue {
 public:
  explicit WorkerPool(size_t max_threads);

  // Runs `connection` on a new worker, or after the running ones when `max_threads` run.
  void enqueue(std::function<void()> connection) override;

  // Waits until every connection given so far has run.
  void shutdown() override;

 private:
  // Shared with the workers, which may still be ending after the pool is gone.
  struct State {
    std::mutex mutex;
    std::condition_variable all_done;
    std::deque<std::function<void()>> waiting;
    size_t running = 0;
  };
  static void work(const std::shared_ptr<State>& state, std::function<void()> connection);

  std::shared_ptr<State> state_ = std::make_shared<State>();
  size_t max_threads_;
};

}  // namespace pagoda::server
