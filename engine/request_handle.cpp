#include "engine/request/request_state.h"
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

const char* pooling_name(Pooling pooling) {
  switch (pooling) {
    case Pooling::Model: return "model";
    case Pooling::Mean: return "mean";
    case Pooling::Cls: return "cls";
    case Pooling::Last: return "last";
    case Pooling::Rank: return "rank";
    case Pooling::None: return "none";
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

namespace {

// Seeing the end marker: put it back for any other reader, and remember it.
void note_end(detail::RequestState& state, const std::optional<StreamEvent>& event) {
  if (event) return;
  state.stream_ended.store(true);
  state.stream.enqueue(std::nullopt);
}

}  // namespace

std::optional<StreamEvent> RequestHandle::next_token() {
  if (!state_->streaming) return std::nullopt;
  std::optional<StreamEvent> event;
  state_->stream.wait_dequeue(event);
  note_end(*state_, event);
  return event;
}

std::optional<StreamEvent> RequestHandle::next_token(std::chrono::milliseconds timeout) {
  if (!state_->streaming) return std::nullopt;
  std::optional<StreamEvent> event;
  if (!state_->stream.wait_dequeue_timed(event, timeout)) return std::nullopt;
  note_end(*state_, event);
  return event;
}

bool RequestHandle::stream_ended() const { return !state_->streaming || state_->stream_ended; }

}  // namespace pagoda
