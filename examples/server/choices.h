#pragma once
// OpenAI's `n` (and completions' `best_of`): one API request run as several engine requests on
// the same prompt, each with its own sampling stream (seed + i). The first is submitted alone
// and the others once its prompt is in the KV cache (its first token is out), so they find the
// prompt's full pages in the prefix cache: the prompt is computed once, not n times.

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "examples/server/openai_request.h"
#include "pagoda/engine.h"
#include "pagoda/request.h"

namespace pagoda::server {

// Submits `count` requests like `request` (seeds request.sampling.seed + i). Throws
// pagoda::Error as Engine::submit does; requests already submitted are cancelled first.
std::vector<RequestHandle> submit_choices(Engine& engine, const Request& request, int32_t count);

// Every prompt of `a` (ApiRequest::prompts) as a.best_of choices like a.request: handle i is
// choice i % best_of of prompt i / best_of. Throws as submit_choices, every request submitted
// by then cancelled.
std::vector<RequestHandle> submit_prompts(Engine& engine, const ApiRequest& a);

// Every handle's completion, in order, waited for while watching the client: when
// `client_gone` (may be empty) says it hung up, every request is cancelled and nullopt comes
// back once all have resolved.
std::optional<std::vector<Completion>> await_completions(std::vector<RequestHandle>& handles,
                                                         const std::function<bool()>& client_gone);

// For best_of: the indices of the `n` completions with the highest sum of their tokens'
// logprobs (Request::logprobs >= 0), best first; ties keep the earlier choice.
std::vector<size_t> best_choices(const std::vector<Completion>& completions, int32_t n);

}  // namespace pagoda::server
