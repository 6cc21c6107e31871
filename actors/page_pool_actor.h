#pragma once
// The page-pool actor: sole owner of the paged KV cache's free list and reference counts.
// Schedulers ask it for pages (a round trip) and give pages back (one way); when pages come
// back while the prefill scheduler waits for some, it tells it.

#include <optional>
#include <vector>

#include "actors/actor.h"
#include "actors/messages.h"
#include "engine/request/metrics_board.h"
#include "engine/kv/page_pool.h"

namespace pagoda {

class PagePoolActor : public Actor<PageMessage> {
 public:
  PagePoolActor(PagePool& pool, MetricsBoard& metrics) : pool_(pool), metrics_(metrics) { publish(); }

  void set_prefill_mailbox(std::shared_ptr<Mailbox<PrefillMessage>> prefill) { prefill_ = std::move(prefill); }

  // Asks for `count` pages, leaving at least `keep_free` free; blocks for the answer. Called
  // from the schedulers' threads.
  std::optional<std::vector<int32_t>> allocate(int32_t count, int32_t keep_free, PageRequester requester);

  void release(std::vector<int32_t> pages) {
    if (!pages.empty()) post(ReleasePages{std::move(pages)});
  }

  // Handles what is left in the mailbox after the actor stopped (shutdown).
  void drain();

 private:
  void handle(PageMessage message) override;
  void publish();

  PagePool& pool_;
  MetricsBoard& metrics_;
  std::shared_ptr<Mailbox<PrefillMessage>> prefill_;
  bool prefill_waiting_ = false;
};

}  // namespace pagoda
