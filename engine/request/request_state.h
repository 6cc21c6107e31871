#pragma once
// The state a request shares between the caller's RequestHandle and the engine: the promise,
// the cancel flag, and the pull stream. Everything else about a request lives in its
// Sequence, which exactly one actor owns at a time.

#include <blockingconcurrentqueue.h>

#include <atomic>
#include <future>
#include <memory>
#include <optional>

#include <functional>
#include "pagoda/request.h"

namespace pagoda::detail {

struct RequestState {
  uint64_t id = 0;
  std::promise<Completion> promise;
  std::atomic<bool> cancel_requested{false};
  std::atomic<bool> done{false};
  bool streaming = false;
  moodycamel::BlockingConcurrentQueue<std::optional<StreamEvent>> stream;  // nullopt ends it
  std::atomic<bool> stream_ended{false};                                   // a reader has seen the end marker
  // Whom to nudge on cancel; weak, so a handle may outlive its engine.
  std::function<void()> notify_cancel;

  // Resolves the request once; later calls are ignored. Ends the pull stream.
  bool complete(Completion completion) {
    bool expected = false;
    if (!done.compare_exchange_strong(expected, true)) return false;
    if (streaming) stream.enqueue(std::nullopt);
    promise.set_value(std::move(completion));
    return true;
  }
};

}  // namespace pagoda::detail
