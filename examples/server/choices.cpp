#include "examples/server/choices.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <numeric>

namespace pagoda::server {

namespace {

// How often a request computed for a non-streamed answer looks whether its client hung up.
constexpr std::chrono::milliseconds kHangupPoll(100);

// Set by the first choice's first token (or its end): its prompt's pages are then cached.
struct FirstToken {
  std::mutex mutex;
  std::condition_variable cv;
  bool seen = false;

  void signal() {
    {
      std::lock_guard lock(mutex);
      seen = true;
    }
    cv.notify_all();
  }
};

}  // namespace

std::vector<RequestHandle> submit_choices(Engine& engine, const Request& request, int32_t count) {
  std::vector<RequestHandle> handles;
  try {
    auto first_token = std::make_shared<FirstToken>();
    Request first = request;
    first.on_token = [first_token, inner = request.on_token](const StreamEvent& e) {
      if (inner) inner(e);
      first_token->signal();
    };
    handles.push_back(engine.submit(std::move(first)));
    if (count > 1) {
      std::unique_lock lock(first_token->mutex);
      // Also wakes if the first choice ends without a token (cancelled, refused mid-way).
      while (!first_token->seen && handles[0].future().wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
        first_token->cv.wait_for(lock, std::chrono::milliseconds(20));
      }
    }
    for (int32_t i = 1; i < count; ++i) {
      Request r = request;
      r.sampling.seed += uint64_t(i);
      handles.push_back(engine.submit(std::move(r)));
    }
  } catch (...) {
    for (RequestHandle& h : handles) h.cancel();
    throw;
  }
  return handles;
}

std::vector<RequestHandle> submit_prompts(Engine& engine, const ApiRequest& a) {
  std::vector<RequestHandle> handles;
  try {
    for (const std::vector<int32_t>& prompt : a.prompts) {
      Request r = a.request;
      r.prompt_ids = prompt;
      for (RequestHandle& h : submit_choices(engine, r, a.best_of)) handles.push_back(std::move(h));
    }
  } catch (...) {
    for (RequestHandle& h : handles) h.cancel();
    throw;
  }
  return handles;
}

std::optional<std::vector<Completion>> await_completions(std::vector<RequestHandle>& handles,
                                                         const std::function<bool()>& client_gone) {
  using Clock = std::chrono::steady_clock;
  std::vector<Completion> done;
  bool cancelled = false;
  // The client is looked at every kHangupPoll of the whole wait, not per handle: a long run of
  // requests that each finish within the poll (2,048 short embeddings) is watched too.
  Clock::time_point next_look = Clock::now() + kHangupPoll;
  for (RequestHandle& h : handles) {
    while (!cancelled && client_gone) {
      const bool ready = h.future().wait_until(next_look) == std::future_status::ready;
      if (Clock::now() >= next_look) {
        next_look = Clock::now() + kHangupPoll;
        if (client_gone()) {
          for (RequestHandle& each : handles) each.cancel();
          cancelled = true;
        }
      }
      if (ready) break;
    }
    done.push_back(h.get());
  }
  if (cancelled) return std::nullopt;
  return done;
}

std::vector<size_t> best_choices(const std::vector<Completion>& completions, int32_t n) {
  std::vector<double> score(completions.size(), 0.0);
  for (size_t i = 0; i < completions.size(); ++i) {
    for (const TokenLogprobs& t : completions[i].logprobs) score[i] += t.logprob;
  }
  std::vector<size_t> order(completions.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return score[a] > score[b]; });
  order.resize(std::min(order.size(), size_t(n)));
  return order;
}

}  // namespace pagoda::server
