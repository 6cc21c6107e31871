#pragma once
// The page-pool actor: sole owner of the paged KV cache's accounting and prefix-cache index.
// The prefill scheduler asks it for an admission's pages (a round trip: cached prefix pages,
// then fresh ones); the decode scheduler asks for pages as sequences grow (a round trip),
// names the pages its steps filled and gives pages back (one way). When pages come back while
// the prefill scheduler waits for some, it tells it.

#include <optional>
#include <vector>

#include "actors/actor.h"
#include "actors/messages.h"
#include "engine/metrics/metrics_board.h"
#include "engine/kv/page_pool.h"

namespace pagoda {

class PagePoolActor : public Actor<PageMessage> {
 public:
  PagePoolActor(PagePool& pool, MetricsBoard& metrics) : pool_(pool), metrics_(metrics) { publish(); }

  void set_prefill_mailbox(std::shared_ptr<Mailbox<PrefillMessage>> prefill) { prefill_ = std::move(prefill); }

  // Asks for `count` pages, leaving at least `keep_free` available; blocks for the answer.
  // Called from the schedulers' threads.
  std::optional<std::vector<int32_t>> allocate(int32_t count, int32_t keep_free, PageRequester requester);

  // An admission's pages for positions up to `to`, computing from `from` on or past the
  // longest hit of `prefix` in the prefix cache (messages.h: PageGrant); nullopt (and the
  // prefill scheduler is told when pages come back) when fewer than they + `keep_free` are
  // available. Blocks for the answer.
  std::optional<PageGrant> admit(std::vector<PageHash> prefix, int32_t from, int32_t to, int32_t keep_free);

  void release(std::vector<int32_t> pages) {
    if (!pages.empty()) post(ReleasePages{std::move(pages)});
  }
  void register_pages(std::vector<NamedPage> pages) {
    if (!pages.empty()) post(RegisterPages{std::move(pages)});
  }

  // The page layout (fixed at start-up, so any thread may read it).
  const KvLayout& layout() const { return pool_.layout(); }

  // Handles what is left in the mailbox after the actor stopped (shutdown).
  void drain();

 private:
  void handle(PageMessage message) override;
  void grant(AdmitPages& request);
  void publish();

  PagePool& pool_;
  MetricsBoard& metrics_;
  std::shared_ptr<Mailbox<PrefillMessage>> prefill_;
  bool prefill_waiting_ = false;
};

}  // namespace pagoda
