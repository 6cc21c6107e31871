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

std::optional<PageGrant> PagePoolActor::admit(std::vector<PageHash> prefix, std::vector<WholeBlocks> whole,
                                              int32_t from, int32_t to, int32_t keep_free, bool disk_tier) {
  auto reply = Reply<std::optional<PageGrant>>::make();
  post(AdmitPages{std::move(prefix), std::move(whole), from, to, keep_free, disk_tier, reply});
  return reply->wait();
}

void PagePoolActor::set_event_sink(KvEventSink* sink) {
  events_ = sink;
  pool_.log_evictions(sink != nullptr);
  // A router may remember this replica from an earlier run: none of that holds any more.
  if (events_) pending_events_.push_back(KvAllBlocksCleared{});
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
    for (NamedPage& p : named->pages) name(p);
    publish();
  } else if (auto* r = std::get_if<ReleasePages>(&message)) {
    pool_.release(r->pages);
    pages_came_back();
  } else if (auto* w = std::get_if<PageWritten>(&message)) {
    written(*w);
    pages_came_back();
  } else if (auto* d = std::get_if<PageFilesDamaged>(&message)) {
    forget_damaged(*d);
    publish();
  } else {
    stop();
  }
}

void PagePoolActor::pages_came_back() {
  publish();
  if (prefill_waiting_ && prefill_) {
    prefill_waiting_ = false;
    prefill_->post(PagesFreed{});
  }
}

void PagePoolActor::grant(AdmitPages& request) {
  PagePool::LowerTier on_disk;
  if (disk_ && request.disk_tier) {
    on_disk = [&](const PageHash& hash, int32_t group) {
      return disk_->index.contains({disk_->fingerprint, hash, group});
    };
  }
  // Cached pages nobody holds count as available, so taking them uses some of that up; so do
  // the fresh pages the blocks on disk are read into.
  PagePool::PrefixMatch match = pool_.match(request.prefix, on_disk);
  for (bool cut = true; cut;) {
    cut = false;
    for (const WholeBlocks& w : request.whole) {
      if (w.begin < match.blocks && match.blocks < w.end) {
        request.prefix.resize(size_t(w.begin));
        match = pool_.match(request.prefix, on_disk);
        cut = true;
      }
    }
  }
  const int32_t tokens_per_page = pool_.layout().tokens_per_page;
  const int32_t from = std::max(request.from, match.blocks * tokens_per_page);
  const BlockTable shape(pool_.layout());
  constexpr auto reach = BlockTable::Reach::Admission;
  const int32_t fresh = shape.pages_needed(from, request.to, reach) - match.pages;
  if (pool_.available_pages() - match.idle - match.loads - fresh < request.keep_free) {
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
  g.cached_blocks = g.pooled_blocks = match.blocks;
  for (int32_t group = 0; group < shape.groups(); ++group) {
    const std::vector<int32_t>& hit = cached[size_t(group)];
    const int32_t first = shape.first_live_page(group, match.blocks * tokens_per_page);
    for (size_t i = 0; i < hit.size(); ++i) {
      if (hit[i] >= 0) {
        g.pages.push_back(hit[i]);
        continue;
      }
      const int32_t block = first + int32_t(i);
      g.pages.push_back(*pool_.allocate());
      g.loads.push_back({g.pages.back(), group, block});
      g.pooled_blocks = std::min(g.pooled_blocks, block);
    }
    pool_.allocate(shape.group_pages_needed(group, from, request.to, reach) - int32_t(hit.size()), g.pages);
  }
  publish();
  request.reply->set(std::move(g));
}

void PagePoolActor::name(NamedPage& page) {
  if (!pool_.register_page(page.page, page.hash, page.group)) return;
  note_stored(page, KvTier::Ram);
  if (!disk_ || draining_ || !page.persist) return;
  const PageFileName file{disk_->fingerprint, page.hash, page.group};
  if (disk_->index.contains(file)) {
    disk_->index.touch(file);
    return;
  }
  if (writing_.count(file)) return;
  // A burst waits its turn unheld, so writing never takes more than the backlog's pages from
  // the pool; one the pool lets go of meanwhile is not written.
  if (to_write_.size() >= size_t(pool_.capacity())) {
    ++writes_skipped_;
    return;
  }
  to_write_.push_back(std::move(page));
  write_waiting();
}

void PagePoolActor::write_waiting() {
  while (!to_write_.empty() && int32_t(writing_.size()) < disk_->max_backlog) {
    NamedPage page = std::move(to_write_.front());
    to_write_.pop_front();
    const PageFileName file{disk_->fingerprint, page.hash, page.group};
    if (pool_.named_page(page.hash, page.group) != page.page || disk_->index.contains(file) || writing_.count(file)) {
      if (!disk_->index.contains(file) && !writing_.count(file)) ++writes_skipped_;
      continue;
    }
    // Held until written: a cached page would otherwise be given to new work mid-write.
    pool_.hold_named(page.page);
    writing_.insert(file);
    disk_->mailbox->post(WritePage{std::move(page)});
  }
}

void PagePoolActor::written(PageWritten& w) {
  const NamedPage& page = w.page;
  pool_.release(page.page);
  const PageFileName file{disk_->fingerprint, page.hash, page.group};
  writing_.erase(file);
  if (!draining_) write_waiting();
  if (w.file_bytes == 0) return;
  std::vector<PageFileName> evicted = disk_->index.insert(file, w.file_bytes);
  note_stored(page, KvTier::Disk);
  if (evicted.empty()) return;
  disk_evictions_ += int64_t(evicted.size());
  for (const PageFileName& e : evicted) {
    if (e.fingerprint == disk_->fingerprint) note_removed(e.hash, e.group, KvTier::Disk);
  }
  disk_->mailbox->post(RemovePageFiles{std::move(evicted)});
}

void PagePoolActor::forget_damaged(const PageFilesDamaged& d) {
  for (const PageFileName& file : d.names) {
    if (disk_->index.erase(file)) note_removed(file.hash, file.group, KvTier::Disk);
  }
  disk_->mailbox->post(RemovePageFiles{d.names});
}

// Only group 0's pages make events (the full-attention group, when a model has sliding ones):
// vLLM's array-shaped events carry no group, and a router hearing that a sliding group let an
// old block go would forget a prefix the full-attention group still holds.
void PagePoolActor::note_stored(const NamedPage& page, KvTier tier) {
  if (!events_ || page.group != 0) return;
  // A sequence's consecutive blocks make one event, as vLLM sends them.
  if (!pending_events_.empty()) {
    if (auto* last = std::get_if<KvBlockStored>(&pending_events_.back());
        last && last->tier == tier && last->group == page.group && last->hashes.back() == page.previous) {
      last->hashes.push_back(page.hash);
      last->token_ids.insert(last->token_ids.end(), page.tokens.begin(), page.tokens.end());
      return;
    }
  }
  KvBlockStored e;
  e.hashes = {page.hash};
  if (page.block > 0) e.parent = page.previous;
  e.token_ids = page.tokens;
  e.block_size = pool_.layout().tokens_per_page;
  e.group = page.group;
  e.tier = tier;
  pending_events_.push_back(std::move(e));
}

void PagePoolActor::note_removed(const PageHash& hash, int32_t group, KvTier tier) {
  if (!events_ || group != 0) return;
  if (!pending_events_.empty()) {
    if (auto* last = std::get_if<KvBlockRemoved>(&pending_events_.back());
        last && last->tier == tier && last->group == group) {
      last->hashes.push_back(hash);
      return;
    }
  }
  pending_events_.push_back(KvBlockRemoved{{hash}, group, tier});
}

void PagePoolActor::drain() {
  draining_ = true;
  to_write_.clear();
  while (auto m = mailbox_->try_receive()) {
    if (auto* a = std::get_if<AllocatePages>(&*m)) {
      a->reply->set(std::nullopt);
    } else if (auto* admit = std::get_if<AdmitPages>(&*m)) {
      admit->reply->set(std::nullopt);
    } else if (auto* named = std::get_if<RegisterPages>(&*m)) {
      for (NamedPage& p : named->pages) name(p);
    } else if (auto* r = std::get_if<ReleasePages>(&*m)) {
      pool_.release(r->pages);
    } else if (auto* w = std::get_if<PageWritten>(&*m)) {
      written(*w);
    } else if (auto* d = std::get_if<PageFilesDamaged>(&*m)) {
      forget_damaged(*d);
    }
  }
  publish();
}

void PagePoolActor::publish() {
  metrics_.pages_used.store(pool_.used_pages(), std::memory_order_relaxed);
  metrics_.pages_cached.store(pool_.cached_pages(), std::memory_order_relaxed);
  metrics_.pages_total.store(pool_.capacity(), std::memory_order_relaxed);
  metrics_.ram_evictions.store(pool_.evictions(), std::memory_order_relaxed);
  if (disk_) {
    metrics_.disk_pages.store(int64_t(disk_->index.files()), std::memory_order_relaxed);
    metrics_.disk_bytes.store(int64_t(disk_->index.bytes()), std::memory_order_relaxed);
    metrics_.disk_write_backlog.store(int64_t(writing_.size() + to_write_.size()), std::memory_order_relaxed);
    metrics_.disk_writes_skipped.store(writes_skipped_, std::memory_order_relaxed);
    metrics_.disk_evictions.store(disk_evictions_, std::memory_order_relaxed);
  }
  if (!events_) return;
  for (const PagePool::PageName& evicted : pool_.take_evicted()) note_removed(evicted.hash, evicted.group, KvTier::Ram);
  if (!pending_events_.empty()) events_->publish(std::exchange(pending_events_, {}));
}

}  // namespace pagoda
