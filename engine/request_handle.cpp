#include "engine/request_state.h"
#include "pagoda/request.h"

namespace pagoda {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::Eos: return "eos";
    case FinishReason::Length: return "length";
    case FinishReason::Stop: return "stop";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::Error: return "error";
  }
  return "unknown";
}

RequestHandle::RequestHandle(std::shared_ptr<detail::RequestState> state, std::future<Completion> future)
    : state_(std::move(state)), future_(std::move(future)) {}
RequestHandle::RequestHandle(RequestHandle&&) noexcept = default;
RequestHandle& RequestHandle::operator=(RequestHandle&&) noexcept = default;
RequestHandle::~RequestHandle() = default;

uint64_t RequestHandle::id() const { return state_->id; }

void RequestHandle::cancel() {
  if (state_->done.load()) return;
  state_->cancel_requested.store(true);
  state_->notify_cancel();
}

std::optional<StreamEvent> RequestHandle::next_token() {
  if (!state_->streaming) return std::nullopt;
  std::optional<StreamEvent> event;
  state_->stream.wait_dequeue(event);
  if (!event) state_->stream.enqueue(std::nullopt);  // keep the end marker for later calls
  return event;
}

}  // namespace pagoda
