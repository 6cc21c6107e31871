#include "engine/request/sequence.h"

#include <chrono>
#include <exception>
#include <utility>

#include "engine/speculation/verifier.h"

namespace pagoda {

void Sequence::sample(std::span<const float> logits, size_t vocab) {
  SequenceSampling s{sampler, tokens, size_t(prompt_len), ending_ids, grammar.get(), max_new_tokens, logprobs};
  sampled.clear();
  const std::span<const int32_t> guesses = spec.guesses();
  if (guesses.empty()) {
    sample_next(s, logits.first(vocab), sampled);
  } else {
    speculation::verify(s, guesses, logits, vocab, sampled);
  }
}

void Sequence::finish(FinishReason reason, std::string error) {
  status = SequenceStatus::Finished;
  Completion c;
  c.token_ids.assign(tokens.begin() + prompt_len, tokens.end());
  c.logprobs = std::move(logprobs_out);
  c.prompt_logprobs = std::move(prompt_logprobs_out);
  if (embedding && embedding->complete()) c.embedding = embedding->result();
  const std::string tail = output.finish();
  if (!tail.empty()) emit({-1, tail});
  c.text = output.text();
  if (output.stopped()) c.stop_string = output.stop_string();
  c.finish_reason = reason;
  c.error = std::move(error);
  c.prompt_tokens = prompt_len;
  c.preemptions = preemptions;
  using Seconds = std::chrono::duration<double>;
  if (generated() > 0) {
    c.time_to_first_token_s = Seconds(first_token - submitted).count();
    if (generated() > 1) c.time_per_output_token_s = Seconds(last_token - first_token).count() / (generated() - 1);
  }
  state->complete(std::move(c));
  if (on_adapter_done) std::exchange(on_adapter_done, nullptr)();
}

void Sequence::emit(const StreamEvent& event) {
  if (on_token) {
    try {
      on_token(event);
    } catch (const std::exception& e) {
      callback_error = std::string("on_token threw: ") + e.what();
      on_token = nullptr;
    } catch (...) {
      callback_error = "on_token threw";
      on_token = nullptr;
    }
  }
  if (state->streaming) state->stream.enqueue(event);
}

}  // namespace pagoda
