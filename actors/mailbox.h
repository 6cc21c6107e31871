#pragma once
// An actor's mailbox: a lock-free MPMC queue (moodycamel BlockingConcurrentQueue) that any
// thread posts to and the owning actor reads. Receiving blocks on a semaphore (after a brief
// spin), so an idle actor burns no CPU. Messages from one thread arrive in the order posted.

#include <blockingconcurrentqueue.h>

#include <chrono>
#include <optional>

namespace pagoda {

template <typename Message>
class Mailbox {
 public:
  void post(Message message) { queue_.enqueue(std::move(message)); }

  // Blocks until a message arrives.
  Message receive() {
    Message m;
    queue_.wait_dequeue(m);
    return m;
  }

  // A message if one is waiting, without blocking.
  std::optional<Message> try_receive() {
    Message m;
    if (queue_.try_dequeue(m)) return m;
    return std::nullopt;
  }

  // Blocks for at most `timeout`.
  template <typename Rep, typename Period>
  std::optional<Message> receive_for(std::chrono::duration<Rep, Period> timeout) {
    Message m;
    if (queue_.wait_dequeue_timed(m, timeout)) return m;
    return std::nullopt;
  }

 private:
  moodycamel::BlockingConcurrentQueue<Message> queue_;
};

}  // namespace pagoda
