#pragma once
// A one-shot reply slot for request/response between actors: the asker posts a message that
// carries a Reply, then waits on it; the answering actor sets it once. Built on moodycamel's
// lightweight semaphore rather than std::promise so no mutex sits on the step's path.

#include <lightweightsemaphore.h>

#include <memory>
#include <optional>

namespace pagoda {

template <typename T>
class Reply {
 public:
  static std::shared_ptr<Reply> make() { return std::make_shared<Reply>(); }

  void set(T value) {
    value_ = std::move(value);
    ready_.signal();
  }

  // Blocks until set() has been called; the value's writes happen-before this returns.
  T wait() {
    ready_.wait();
    return std::move(*value_);
  }

 private:
  std::optional<T> value_;
  moodycamel::LightweightSemaphore ready_;
};

}  // namespace pagoda
