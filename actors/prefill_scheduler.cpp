#include "actors/prefill_scheduler.h"

#include <algorithm>

namespace pagoda {

namespace {

// Preempted sequences first (oldest admission first), then priority, then arrival.
bool admitted_before(const SequencePtr& a, const SequencePtr& b) {
  if (a->requeued != b->requeued) return a->requeued;
  if (a->requeued) return a->admit_order < b->admit_order;
  if (a->priority != b->priority) return a->priority > b->priority;
  return a->id() < b->id();
}

// What the keys of a sequence's pages need of its images.
std::vector<PrefixImage> prefix_images(const std::vector<SequenceImage>& images) {
  std::vector<PrefixImage> out;
  for (const SequenceImage& image : images) out.push_back({image.hash, image.position, image.tokens});
  return out;
}

}  // namespace

void PrefillScheduler::handle(PrefillMessage message) {
  if (auto* r = std::get_if<NewRequest>(&message)) {
    enqueue(std::move(r->seq));
  } else if (auto* q = std::get_if<Requeue>(&message)) {
    ++credits_;
    enqueue(std::move(q->seq));
  } else if (auto* s = std::get_if<SlotsFreed>(&message)) {
    credits_ += s->count;
  } else if (std::holds_alternative<Stop>(message)) {
    for (SequencePtr& seq : waiting_) cancel(*seq);
    waiting_.clear();
    decode_->post(Stop{});
    stop();
    return;
  }
  drop_cancelled();
  admit();
}

void PrefillScheduler::enqueue(SequencePtr seq) {
  seq->status = seq->requeued ? SequenceStatus::Preempted : SequenceStatus::Waiting;
  auto at = std::upper_bound(waiting_.begin(), waiting_.end(), seq, admitted_before);
  waiting_.insert(at, std::move(seq));
}

void PrefillScheduler::drop_cancelled() {
  std::erase_if(waiting_, [&](SequencePtr& seq) {
    if (!seq->cancel_requested()) return false;
    cancel(*seq);
    return true;
  });
}

void PrefillScheduler::admit() {
  while (credits_ > 0 && !waiting_.empty()) {
    Sequence& seq = *waiting_.front();
    const auto len = int32_t(seq.tokens.size());
    const bool disk_tier = disk_ && seq.disk_reads;
    auto grant =
        pool_.admit(prefix_keys(seq), whole_blocks(seq), seq.n_cached, len, seq.requeued ? 0 : keep_free_, disk_tier);
    if (!grant) return;  // the pool says PagesFreed when some come back
    if (seq.prefix_cache) took_prefix(seq, *grant);
    seq.table.grow(seq.n_cached, len, grant->pages, BlockTable::Reach::Admission);
    seq.status = SequenceStatus::Prefilling;
    seq.requeued = false;
    seq.admit_order = next_admit_order_++;
    --credits_;
    metrics_.queued.fetch_sub(1, std::memory_order_relaxed);
    if (grant->loads.empty()) {
      decode_->post(Admitted{std::move(waiting_.front())});
    } else {
      const int32_t disk_tokens = (grant->cached_blocks - grant->pooled_blocks) * seq.table.tokens_per_page();
      disk_->post(LoadPages{std::move(waiting_.front()), std::move(grant->loads), disk_tokens});
    }
    waiting_.erase(waiting_.begin());
  }
}

std::vector<PageHash> PrefillScheduler::prefix_keys(Sequence& seq) {
  if (!seq.prefix_cache) return {};
  if (!seq.prefix.seeded()) {
    seq.prefix.reset(prefix_seed(pool_.layout(), seq.adapter, seq.adapter_generation), prefix_images(seq.images));
  }
  // A swapped-out sequence brings its own pages' contents back.
  if (!seq.swapped_kv.empty()) return {};
  const auto keys = seq.prefix.lookup_keys(seq.tokens, seq.table.tokens_per_page());
  return {keys.begin(), keys.end()};
}

std::vector<WholeBlocks> PrefillScheduler::whole_blocks(const Sequence& seq) {
  // A hit must not end inside an image whose rows attend both ways (Gemma 3's): its other rows
  // would attend to cached rows that a sliding group gives back at admission, and the forward
  // pass computes such an image whole. A hit that would stops at the page the image's first row
  // is on (its rows are encoded once, ImageRowCache, whatever the cache holds); one that covers
  // the image goes on past it.
  const int32_t tpp = seq.table.tokens_per_page();
  std::vector<WholeBlocks> whole;
  for (const SequenceImage& image : seq.images) {
    if (image.bidirectional) whole.push_back({image.position / tpp, (image.position + image.tokens + tpp - 1) / tpp});
  }
  return whole;
}

void PrefillScheduler::took_prefix(Sequence& seq, const PageGrant& grant) {
  // The pool's pages of the hit are already named; the pages after them are offered as they
  // fill (a swapped-in sequence's fresh copies too, which the pool names unless their hash is
  // taken), and so are the pages read from disk.
  seq.prefix.set_offered(grant.pooled_blocks);
  if (!seq.swapped_kv.empty()) return;
  seq.n_cached = grant.cached_blocks * seq.table.tokens_per_page();
  // A hit may end inside an image. Its rows before n_cached are in pages whose keys name this
  // image and these rows, so they hold what feeding them would compute; the rest are fed from
  // the image's encoded rows, as when a prefill chunk ends inside an image (the step planner
  // charges, and the decode scheduler encodes, an image for the chunk that feeds any of its
  // rows). Cutting the hit back to the image's start would only compute granted pages again.
  // An image the hit covers whole is never encoded, but keeps its pixels: a recompute after a
  // preemption may miss the cache.
  // A hit read from disk counts once its pages are read (the disk-tier actor counts it).
  if (grant.loads.empty()) metrics_.prefix_hit_tokens.fetch_add(seq.n_cached, std::memory_order_relaxed);
  metrics_.prefix_queried_tokens.fetch_add(int64_t(seq.tokens.size()), std::memory_order_relaxed);
}

void PrefillScheduler::cancel(Sequence& seq) {
  metrics_.queued.fetch_sub(1, std::memory_order_relaxed);
  metrics_.finished.fetch_add(1, std::memory_order_relaxed);
  seq.finish(FinishReason::Cancelled);
}

void PrefillScheduler::drain() {
  while (auto m = mailbox_->try_receive()) {
    if (auto* r = std::get_if<NewRequest>(&*m)) cancel(*r->seq);
    if (auto* q = std::get_if<Requeue>(&*m)) cancel(*q->seq);
  }
}

}  // namespace pagoda
