#pragma once
// The threads pagoda-server's blocking handlers run on (generation waits on the engine): one
// per running request, up to a cap, started when a request comes and ended when none waits.
// A request holds its worker for its whole life (a stream for all its tokens), so the cap is
// sized for requests, not cores; requests beyond it wait in order. The HTTP I/O itself is on
// the server's io threads (http_server.h), so an idle or slow connection holds no worker.
//
// Why threads end instead of idling in a fixed pool: mimalloc keeps a heap per thread, and an
// idle thread never hands back what its last request used (its free pages are returned
// only when that thread calls the allocator again). Measured on s15m with 300 workers: ≈ 250 KB
// per worker, 74 MB after one pass of 256 streams and 102 MB after six. A thread that ends
// gives its heap back; a new thread costs microseconds against a request's milliseconds.

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>

namespace pagoda::server {

class WorkerPool {
 public:
  explicit WorkerPool(size_t max_threads);

  // Runs `task` on a new worker, or after the running ones when `max_threads` run. False (and
  // `task` dropped) when no thread can be started and none runs to take it.
  bool enqueue(std::function<void()> task);

  // Waits until every task given so far has run.
  void shutdown();

 private:
  // Shared with the workers, which may still be ending after the pool is gone.
  struct State {
    std::mutex mutex;
    std::condition_variable all_done;
    std::deque<std::function<void()>> waiting;
    size_t running = 0;
  };
  static void work(const std::shared_ptr<State>& state, std::function<void()> task);

  std::shared_ptr<State> state_ = std::make_shared<State>();
  size_t max_threads_;
};

}  // namespace pagoda::server
