#pragma once
// The LoRA router actor: every request passes through it on its way to the prefill
// scheduler. It resolves the request's adapter; an unknown adapter fails that request alone.
// (Only the base model is served until adapters arrive.)

#include "actors/actor.h"
#include "actors/messages.h"
#include "engine/metrics_board.h"

namespace pagoda {

class LoraRouter : public Actor<RouterMessage> {
 public:
  LoraRouter(std::shared_ptr<Mailbox<PrefillMessage>> prefill, MetricsBoard& metrics)
      : prefill_(std::move(prefill)), metrics_(metrics) {}

  // Cancels what is left in the mailbox after the actor stopped (shutdown).
  void drain();

 private:
  void handle(RouterMessage message) override;

  std::shared_ptr<Mailbox<PrefillMessage>> prefill_;
  MetricsBoard& metrics_;
};

}  // namespace pagoda
