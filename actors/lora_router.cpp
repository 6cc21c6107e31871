#include "actors/lora_router.h"

#include <chrono>

namespace pagoda {

void LoraRouter::handle(RouterMessage message) {
  if (auto* r = std::get_if<NewRequest>(&message)) {
    route(std::move(r->seq));
  } else if (auto* reg = std::get_if<RegisterAdapter>(&message)) {
    if (registry_.count(reg->name)) {
      reg->reply->set("LoRA adapter '" + reg->name + "' is already loaded");
    } else {
      Entry& entry = registry_[reg->name];
      entry.adapter = reg->adapter;
      entry.generation = ++loads_;
      reg->reply->set({});
    }
  } else if (auto* unreg = std::get_if<UnregisterAdapter>(&message)) {
    auto it = registry_.find(unreg->name);
    if (it == registry_.end()) {
      unreg->reply->set("LoRA adapter '" + unreg->name + "' is not loaded");
      return;
    }
    // Requests already forwarded hold their weights and finish on them; waiting ones fail.
    if (it->second.resident) --resident_;
    registry_.erase(it);
    std::erase_if(waiting_, [&](SequencePtr& seq) {
      if (seq->adapter != unreg->name) return false;
      fail(*seq, FinishReason::Error, "LoRA adapter '" + unreg->name + "' was unloaded before the request ran");
      return true;
    });
    metrics_.adapters_resident.store(resident_, std::memory_order_relaxed);
    unreg->reply->set({});
    dispatch();
  } else if (auto* done = std::get_if<AdapterDone>(&message)) {
    if (auto it = registry_.find(done->name); it != registry_.end()) --it->second.in_flight;
    dispatch();
  } else {
    for (SequencePtr& seq : waiting_) fail(*seq, FinishReason::Cancelled, {});
    waiting_.clear();
    prefill_->post(Stop{});
    stop();
  }
}

void LoraRouter::route(SequencePtr seq) {
  if (seq->adapter.empty()) {
    forward(std::move(seq), nullptr);
  } else if (!registry_.count(seq->adapter)) {
    fail(*seq, FinishReason::Error, "unknown LoRA adapter '" + seq->adapter + "'");
  } else {
    waiting_.push_back(std::move(seq));
    dispatch();
  }
}

void LoraRouter::dispatch() {
  std::erase_if(waiting_, [&](SequencePtr& seq) {
    if (!seq->cancel_requested()) return false;
    fail(*seq, FinishReason::Cancelled, {});
    return true;
  });
  while (!waiting_.empty()) {
    const std::string name = waiting_.front()->adapter;
    Entry& entry = registry_.at(name);
    if (!make_resident(name, entry)) return;  // an AdapterDone will bring us back
    int32_t run = 0;
    for (auto it = waiting_.begin(); it != waiting_.end() && run < run_cap_;) {
      if ((*it)->adapter != name) {
        ++it;
        continue;
      }
      forward(std::move(*it), &entry);
      it = waiting_.erase(it);
      ++run;
    }
  }
}

bool LoraRouter::make_resident(const std::string& name, Entry& entry) {
  entry.last_used = ++tick_;
  if (entry.resident) return true;
  if (resident_ == max_resident_) {
    Entry* lru = nullptr;
    for (auto& [other_name, other] : registry_) {
      if (other.resident && other.in_flight == 0 && (!lru || other.last_used < lru->last_used)) lru = &other;
    }
    if (!lru) return false;  // every resident adapter is in use
    lru->resident.reset();
    --resident_;
  }
  const auto start = std::chrono::steady_clock::now();
  entry.resident = std::make_shared<const LoraWeights>(name, *entry.adapter);
  ++resident_;
  metrics_.adapter_swaps.fetch_add(1, std::memory_order_relaxed);
  metrics_.adapter_swap_ns.fetch_add(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count(),
      std::memory_order_relaxed);
  metrics_.adapters_resident.store(resident_, std::memory_order_relaxed);
  return true;
}

void LoraRouter::forward(SequencePtr seq, Entry* entry) {
  if (entry) {
    ++entry->in_flight;
    seq->lora = entry->resident;
    seq->adapter_generation = entry->generation;
    seq->on_adapter_done = [router = std::weak_ptr(mailbox_), name = seq->adapter] {
      if (auto r = router.lock()) r->post(AdapterDone{name});
    };
  }
  prefill_->post(NewRequest{std::move(seq)});
}

void LoraRouter::fail(Sequence& seq, FinishReason reason, std::string error) {
  metrics_.queued.fetch_sub(1, std::memory_order_relaxed);
  metrics_.finished.fetch_add(1, std::memory_order_relaxed);
  seq.finish(reason, std::move(error));
}

void LoraRouter::drain() {
  while (auto m = mailbox_->try_receive()) {
    if (auto* r = std::get_if<NewRequest>(&*m)) fail(*r->seq, FinishReason::Cancelled, {});
    if (auto* reg = std::get_if<RegisterAdapter>(&*m)) reg->reply->set("the engine is shut down");
    if (auto* unreg = std::get_if<UnregisterAdapter>(&*m)) unreg->reply->set("the engine is shut down");
  }
}

}  // namespace pagoda
