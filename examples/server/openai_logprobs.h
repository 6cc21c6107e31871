#pragma once
// Generated tokens' logprobs in OpenAI's two shapes: chat's `logprobs.content` (token, logprob,
// bytes, top_logprobs) and completions' `logprobs` (tokens, token_logprobs, top_logprobs as
// {text: logprob}, text_offset). A token's text is its piece as it reads in the output, which
// may be part of a UTF-8 character: chat's `bytes` carry it exactly.

#include <cstddef>
#include <cstdint>
#include <span>

#include <nlohmann/json.hpp>

#include "examples/server/openai_request.h"
#include "pagoda/engine.h"
#include "pagoda/request.h"

namespace pagoda::server {

// One entry of chat's logprobs.content.
nlohmann::json chat_logprob_json(const Engine& engine, int32_t token, const TokenLogprobs& lp);

// The `logprobs` of a choice for `tokens` (one TokenLogprobs each); for completions,
// text_offset counts from `text_offset`.
nlohmann::json logprobs_json(Endpoint endpoint, const Engine& engine, std::span<const int32_t> tokens,
                             std::span<const TokenLogprobs> logprobs, size_t text_offset = 0);

// Completions' `logprobs` with `echo`: the prompt's tokens first, the first with null logprobs
// (nothing precedes it), then `generated` (logprobs_json of the completion's tokens, its
// text_offset counted on from the prompt's pieces).
nlohmann::json echo_logprobs_json(const Engine& engine, std::span<const int32_t> prompt,
                                  std::span<const TokenLogprobs> prompt_logprobs, std::span<const int32_t> tokens,
                                  std::span<const TokenLogprobs> logprobs);

// Whether `token` ended the output (EOS or a stop id) rather than adding text to it.
bool is_ending_token(const Engine& engine, const Request& request, int32_t token);

}  // namespace pagoda::server
