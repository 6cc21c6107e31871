#pragma once
// pagoda's results → OpenAI's response JSON: the whole completion, and the chunks of a stream.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol/sse.h"
#include "protocol/tool_calls.h"
#include "examples/server/openai_request.h"
#include "pagoda/request.h"

namespace pagoda::server {

// What every response and chunk of one request shares.
struct ResponseHeader {
  std::string id;       // "cmpl-…" or "chatcmpl-…"
  int64_t created = 0;  // Unix seconds
  std::string model;
  Endpoint endpoint = Endpoint::Completions;
};

ResponseHeader response_header(const ApiRequest& request, uint64_t serial);

// "stop" (EOS, a stop token or string), "length"; null while a stream goes on.
const char* openai_finish_reason(FinishReason reason);

nlohmann::json usage_json(int64_t prompt_tokens, int64_t completion_tokens);

// One choice of a non-streamed response: its text (with an echoed prompt) and `logprobs`
// (null when not asked for); a chat reply's thinking and tool calls.
struct Choice {
  std::string text;
  FinishReason finish_reason = FinishReason::Length;
  nlohmann::json logprobs;
  std::string reasoning;
  std::vector<chat::ParsedToolCall> tool_calls;
  std::string stop_string;  // Completion::stop_string
};

// "call_" and 24 random letters and digits, unless the model wrote the call's id itself.
std::string tool_call_id(const chat::ParsedToolCall& call);

// OpenAI's `tool_calls` of a message ([{"id", "type": "function", "function": {"name",
// "arguments"}}]); in a stream delta each also has its `index`.
nlohmann::json tool_calls_json(const std::vector<chat::ParsedToolCall>& calls, bool streamed);

// A chat stream chunk of a split reply: `delta` holds any of content, reasoning_content and
// tool_calls (the role is added to the first); `finish_reason` is null while it goes on.
nlohmann::json reply_chunk_json(const ResponseHeader& h, int32_t index, nlohmann::json delta, bool first,
                                const char* finish_reason, const nlohmann::json& logprobs = nullptr);

// The non-streamed response: the choices, indexed in order, and the usage of every
// completion the request ran (best_of counts those not returned too).
nlohmann::json completion_json(const ResponseHeader& h, const std::vector<Choice>& choices, int64_t prompt_tokens,
                               int64_t completion_tokens);

// One stream chunk of choice `index`: `text` (the chat's first chunk also carries the
// assistant role), its tokens' `logprobs` when asked for, and the finish reason on the last one.
nlohmann::json chunk_json(const ResponseHeader& h, int32_t index, const std::string& text, bool first,
                          std::optional<FinishReason> finish, const nlohmann::json& logprobs = nullptr);

// Serialised as sent (protocol/sse.h): part of a UTF-8 character is replaced, not refused.
using protocol::dump_json;

// The usage-only chunk of stream_options.include_usage (no choices).
nlohmann::json usage_chunk_json(const ResponseHeader& h, int64_t prompt_tokens, int64_t completion_tokens);

}  // namespace pagoda::server
