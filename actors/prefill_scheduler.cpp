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
    const int32_t need = seq.table.pages_needed(int32_t(seq.tokens.size()));
    auto pages = pool_.allocate(need, seq.requeued ? 0 : keep_free_, PageRequester::Prefill);
    if (!pages) return;  // the pool says PagesFreed when some come back
    seq.table.append(*pages);
    seq.status = SequenceStatus::Prefilling;
    seq.requeued = false;
    seq.admit_order = next_admit_order_++;
    --credits_;
    metrics_.queued.fetch_sub(1, std::memory_order_relaxed);
    decode_->post(Admitted{std::move(waiting_.front())});
    waiting_.erase(waiting_.begin());
  }
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
