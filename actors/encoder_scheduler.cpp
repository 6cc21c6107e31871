#include "actors/encoder_scheduler.h"

#include <chrono>

#include "engine/request/rank_scoring.h"
#include "pagoda/error.h"

namespace pagoda {

EncoderScheduler::EncoderScheduler(EncoderRunner& runner, const EngineConfig& config, MetricsBoard& metrics)
    : runner_(runner),
      max_tokens_(config.max_tokens_per_step),
      max_entries_(config.max_entries_per_step),
      metrics_(metrics) {}

void EncoderScheduler::run() {
  step_loop([&] { return waiting_.empty(); }, [&] { step(); });
}

void EncoderScheduler::handle(EncoderMessage message) {
  if (auto* r = std::get_if<NewRequest>(&message)) {
    waiting_.push_back(std::move(r->seq));
  } else if (std::holds_alternative<Stop>(message)) {
    for (SequencePtr& seq : waiting_) {
      metrics_.queued.fetch_sub(1, std::memory_order_relaxed);
      metrics_.running.fetch_add(1, std::memory_order_relaxed);
      retire(*seq, FinishReason::Cancelled);
    }
    waiting_.clear();
    stop();
  }
  // Wake: the cancel flags are read at the start of every step.
}

void EncoderScheduler::step() {
  const auto start = std::chrono::steady_clock::now();
  step_.clear();
  int64_t tokens = 0;
  while (!waiting_.empty() && int32_t(step_.size()) < max_entries_) {
    SequencePtr& next = waiting_.front();
    if (!next->cancel_requested()) {
      if (!step_.empty() && tokens + next->prompt_len > max_tokens_) break;
      tokens += next->prompt_len;
    }
    metrics_.queued.fetch_sub(1, std::memory_order_relaxed);
    metrics_.running.fetch_add(1, std::memory_order_relaxed);
    if (next->cancel_requested()) retire(*next, FinishReason::Cancelled);
    else step_.push_back(std::move(next));
    waiting_.pop_front();
  }
  if (step_.empty()) return;

  inputs_.clear();
  for (const SequencePtr& seq : step_) inputs_.emplace_back(seq->tokens.data(), size_t(seq->prompt_len));
  try {
    runner_.forward(inputs_, hidden_);
    pool();
  } catch (const Error& e) {  // weights lost, or an input the engine should have refused
    for (SequencePtr& seq : step_) retire(*seq, FinishReason::Error, e.what());
    return;
  }
  for (SequencePtr& seq : step_) retire(*seq, FinishReason::Length);
  metrics_.busy_ns.fetch_add(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count(),
      std::memory_order_relaxed);
}

void EncoderScheduler::pool() {
  const size_t dim = size_t(runner_.config().dim);
  size_t row = 0;
  for (const SequencePtr& seq : step_) {
    // The pooler keeps the rows its pooling needs and skips the others.
    for (int32_t p = 0; p < seq->prompt_len; ++p, ++row)
      seq->embedding->add(p, std::span<const float>(hidden_.data() + row * dim, dim));
  }
  score_rank_pairs(
      step_, dim, [&](const float* rows, int32_t n, float* scores) { runner_.rank_scores(rows, n, scores); },
      rank_rows_, rank_scores_);
}

void EncoderScheduler::retire(Sequence& seq, FinishReason reason, std::string error) {
  // Counted before the future resolves, so a caller who saw it resolve sees the counts too.
  metrics_.running.fetch_sub(1, std::memory_order_relaxed);
  metrics_.finished.fetch_add(1, std::memory_order_relaxed);
  seq.finish(reason, std::move(error));
}

void EncoderScheduler::drain() {
  while (auto m = mailbox_->try_receive()) {
    if (auto* r = std::get_if<NewRequest>(&*m)) {
      metrics_.queued.fetch_sub(1, std::memory_order_relaxed);
      metrics_.running.fetch_add(1, std::memory_order_relaxed);
      retire(*r->seq, FinishReason::Cancelled);
    }
  }
}

}  // namespace pagoda
