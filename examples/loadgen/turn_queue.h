#pragma once
// The conversations waiting for a client to send their next turn, in the order they take it.
// A conversation is in one place at a time, waiting here or with one client, so its turns go
// one after another, each after the reply to the one before.

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>

namespace pagoda::loadgen {

class TurnQueue {
 public:
  // Conversations 0..n-1, waiting in that order.
  explicit TurnQueue(size_t conversations) : unfinished_(conversations) {
    for (size_t i = 0; i < conversations; ++i) waiting_.push_back(i);
  }

  // The first waiting conversation, taken off the queue. Waits while every unfinished one is
  // with a client; nullopt once all have finished.
  std::optional<size_t> take() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !waiting_.empty() || unfinished_ == 0; });
    if (waiting_.empty()) return std::nullopt;
    const size_t conversation = waiting_.front();
    waiting_.pop_front();
    return conversation;
  }

  // A taken conversation waits again, behind the others.
  void put_back(size_t conversation) {
    {
      std::lock_guard lock(mutex_);
      waiting_.push_back(conversation);
    }
    changed_.notify_one();
  }

  // A taken conversation is done: its last turn was answered, or it failed.
  void finish() {
    bool all_done;
    {
      std::lock_guard lock(mutex_);
      all_done = --unfinished_ == 0;
    }
    if (all_done) changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<size_t> waiting_;
  size_t unfinished_;
};

}  // namespace pagoda::loadgen
