#pragma once
// The LoRA router actor: every request passes through it on its way to the prefill
// scheduler. It owns the adapter registry and decides which adapters are resident (packed for
// the kernels): at most `max_resident` at a time, the least recently used idle one swapped
// out when another is needed. Requests are forwarded in arrival order, coalesced into runs of
// up to `run_cap` same-adapter requests, so swaps fall at run boundaries; the oldest waiting
// request holds back those behind it, so no adapter starves.

#include <deque>
#include <map>

#include "actors/actor.h"
#include "actors/messages.h"
#include "engine/metrics/metrics_board.h"

namespace pagoda {

class LoraRouter : public Actor<RouterMessage> {
 public:
  LoraRouter(std::shared_ptr<Mailbox<PrefillMessage>> prefill, int32_t max_resident, int32_t run_cap,
             MetricsBoard& metrics)
      : prefill_(std::move(prefill)), max_resident_(max_resident), run_cap_(run_cap), metrics_(metrics) {}

  // Cancels what is left in the mailbox after the actor stopped (shutdown).
  void drain();

 private:
  struct Entry {
    std::shared_ptr<const LoraAdapter> adapter;
    std::shared_ptr<const LoraWeights> resident;  // null while swapped out
    int32_t in_flight = 0;                        // forwarded requests not yet finished
    uint64_t last_used = 0;
    uint64_t generation = 0;  // which load of this name: prefix-cache pages of an earlier one never match
  };

  void handle(RouterMessage message) override;
  void route(SequencePtr seq);
  void dispatch();
  bool make_resident(const std::string& name, Entry& entry);
  void forward(SequencePtr seq, Entry* entry);
  void fail(Sequence& seq, FinishReason reason, std::string error);

  std::shared_ptr<Mailbox<PrefillMessage>> prefill_;
  int32_t max_resident_;
  int32_t run_cap_;
  MetricsBoard& metrics_;
  std::map<std::string, Entry, std::less<>> registry_;
  std::deque<SequencePtr> waiting_;  // adapter requests not yet forwarded, in arrival order
  int32_t resident_ = 0;
  uint64_t tick_ = 0;
  uint64_t loads_ = 0;
};

}  // namespace pagoda
