#include "actors/page_pool_actor.h"

#include <algorithm>

#include "engine/kv/block_table.h"

namespace pagoda {

std::optional<std::vector<int32_t>> PagePoolActor::allocate(int32_t count, int32_t keep_free, PageRequester requester) {
  if (count == 0) return std::vector<int32_t>{};
  auto reply = Reply<std::optional<std::vector<int32_t>>>::make();
  post(AllocatePages{count, keep_free, requester, reply});
  return reply->wait();
}

std::optional<PageGrant> PagePoolActor::admit(std::vector<PageHash> prefix, int32_t from, int32_t to,
                                              int32_t keep_free) {
  auto reply = Reply<std::optional<PageGrant>>::make();
  post(AdmitPages{std::move(prefix), from, to, keep_free, reply});
  return reply->wait();
}

void PagePoolActor::handle(PageMessage message) {
  if (auto* a = std::get_if<AllocatePages>(&message)) {
    std::vector<int32_t> pages;
    if (pool_.available_pages() - a->count >= a->keep_free && pool_.allocate(a->count, pages)) {
      publish();
      a->reply->set(std::move(pages));
    } else {
      if (a->requester == PageRequester::Prefill) prefill_waiting_ = true;
      a->reply->set(std::nullopt);
    }
  } else if (auto* admit = std::get_if<AdmitPages>(&message)) {
    grant(*admit);
  } else if (auto* named = std::get_if<RegisterPages>(&message)) {
    for (const NamedPage& p : named->pages) pool_.register_page(p.page, p.hash, p.group);
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

void PagePoolActor::grant(AdmitPages& request) {
  // Cached pages nobody holds count as available, so taking them uses some of that up.
  const PagePool::PrefixMatch match = pool_.match(request.prefix);
  const int32_t from = std::max(request.from, match.blocks * pool_.layout().tokens_per_page);
  const BlockTable shape(pool_.layout());
  constexpr auto reach = BlockTable::Reach::Admission;
  const int32_t fresh = shape.pages_needed(from, request.to, reach) - match.pages;
  if (pool_.available_pages() - match.idle - fresh < request.keep_free) {
    prefill_waiting_ = true;
    request.reply->set(std::nullopt);
    return;
  }
  // Every group's hit is taken before any fresh page, which may evict a cached one.
  std::vector<std::vector<int32_t>> cached(size_t(shape.groups()));
  for (int32_t group = 0; group < shape.groups(); ++group) {
    pool_.take_prefix(group, request.prefix, match.blocks, cached[size_t(group)]);
  }
  PageGrant g;
  g.cached_blocks = match.blocks;
  for (int32_t group = 0; group < shape.groups(); ++group) {
    const std::vector<int32_t>& hit = cached[size_t(group)];
    g.pages.insert(g.pages.end(), hit.begin(), hit.end());
    pool_.allocate(shape.group_pages_needed(group, from, request.to, reach) - int32_t(hit.size()), g.pages);
  }
  publish();
  request.reply->set(std::move(g));
}

void PagePoolActor::drain() {
  while (auto m = mailbox_->try_receive()) {
    if (auto* a = std::get_if<AllocatePages>(&*m)) {
      a->reply->set(std::nullopt);
    } else if (auto* admit = std::get_if<AdmitPages>(&*m)) {
      admit->reply->set(std::nullopt);
    } else if (auto* named = std::get_if<RegisterPages>(&*m)) {
      for (const NamedPage& p : named->pages) pool_.register_page(p.page, p.hash, p.group);
    } else if (auto* r = std::get_if<ReleasePages>(&*m)) {
      pool_.release(r->pages);
    }
  }
  publish();
}

void PagePoolActor::publish() {
  metrics_.pages_used.store(pool_.used_pages(), std::memory_order_relaxed);
  metrics_.pages_cached.store(pool_.cached_pages(), std::memory_order_relaxed);
  metrics_.pages_total.store(pool_.capacity(), std::memory_order_relaxed);
}

}  // namespace pagoda
