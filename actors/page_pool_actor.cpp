#include "actors/page_pool_actor.h"

namespace pagoda {

std::optional<std::vector<int32_t>> PagePoolActor::allocate(int32_t count, int32_t keep_free,
                                                            PageRequester requester) {
  if (count == 0) return std::vector<int32_t>{};
  auto reply = Reply<std::optional<std::vector<int32_t>>>::make();
  post(AllocatePages{count, keep_free, requester, reply});
  return reply->wait();
}

void PagePoolActor::handle(PageMessage message) {
  if (auto* a = std::get_if<AllocatePages>(&message)) {
    std::vector<int32_t> pages;
    if (pool_.free_pages() - a->count >= a->keep_free && pool_.allocate(a->count, pages)) {
      publish();
      a->reply->set(std::move(pages));
    } else {
      if (a->requester == PageRequester::Prefill) prefill_waiting_ = true;
      a->reply->set(std::nullopt);
    }
  } else if (auto* r = std::get_if<ReleasePages>(&message)) {
    pool_.release(r->pages);
    publish();
    if (prefill_waiting_ && prefill_) {
      prefill_waiting_ = false;
      prefill_->post(PagesFreed{});
    }
  } else {
    stop();
  }
}

void PagePoolActor::drain() {
  while (auto m = mailbox_->try_receive()) {
    if (auto* a = std::get_if<AllocatePages>(&*m)) {
      a->reply->set(std::nullopt);
    } else if (auto* r = std::get_if<ReleasePages>(&*m)) {
      pool_.release(r->pages);
    }
  }
  publish();
}

void PagePoolActor::publish() {
  metrics_.pages_used.store(pool_.used_pages(), std::memory_order_relaxed);
  metrics_.pages_total.store(pool_.capacity(), std::memory_order_relaxed);
}

}  // namespace pagoda
