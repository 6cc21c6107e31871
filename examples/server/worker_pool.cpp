#include "examples/server/worker_pool.h"

#include <system_error>
#include <thread>

namespace pagoda::server {

WorkerPool::WorkerPool(size_t max_threads) : max_threads_(max_threads) {}

bool WorkerPool::enqueue(std::function<void()> task) {
  {
    std::lock_guard lock(state_->mutex);
    if (state_->running == max_threads_) {
      state_->waiting.push_back(std::move(task));
      return true;
    }
    try {
      std::thread(work, state_, task).detach();  // a copy: `task` survives a failure
      ++state_->running;
      return true;
    } catch (const std::system_error&) {
      // No thread to be had (a process or memory limit): a running worker takes it next.
      if (state_->running > 0) {
        state_->waiting.push_back(std::move(task));
        return true;
      }
    }
  }
  return false;  // not on the caller's thread: it is an io thread, which must not block
}

void WorkerPool::work(const std::shared_ptr<State>& state, std::function<void()> task) {
  for (;;) {
    task();
    task = nullptr;  // its buffers go back before the thread may end
    std::lock_guard lock(state->mutex);
    if (state->waiting.empty()) {
      if (--state->running == 0) state->all_done.notify_all();
      return;
    }
    task = std::move(state->waiting.front());
    state->waiting.pop_front();
  }
}

void WorkerPool::shutdown() {
  std::unique_lock lock(state_->mutex);
  state_->all_done.wait(lock, [&] { return state_->running == 0 && state_->waiting.empty(); });
}

}  // namespace pagoda::server
