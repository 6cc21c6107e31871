#include "actors/lora_router.h"

namespace pagoda {

namespace {

void fail(Sequence& seq, MetricsBoard& metrics, FinishReason reason, std::string error) {
  seq.finish(reason, std::move(error));
  metrics.queued.fetch_sub(1, std::memory_order_relaxed);
  metrics.finished.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

void LoraRouter::handle(RouterMessage message) {
  if (auto* r = std::get_if<NewRequest>(&message)) {
    if (!r->seq->adapter.empty()) {
      fail(*r->seq, metrics_, FinishReason::Error, "unknown LoRA adapter '" + r->seq->adapter + "'");
      return;
    }
    prefill_->post(std::move(*r));
  } else {
    prefill_->post(Stop{});
    stop();
  }
}

void LoraRouter::drain() {
  while (auto m = mailbox_->try_receive()) {
    if (auto* r = std::get_if<NewRequest>(&*m)) fail(*r->seq, metrics_, FinishReason::Cancelled, {});
  }
}

}  // namespace pagoda
