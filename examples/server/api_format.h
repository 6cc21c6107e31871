#pragma once
// How each API writes a generation's answer: the whole response, or the events of its stream.
// Everything else is shared by every API: the request becomes an ApiRequest through one parser
// (openai_request; Responses and Messages bodies are first translated to chat bodies), one
// loop streams the tokens (sse_stream), chat replies are split by one ChatReplySplitter. Only
// the JSON differs: OpenAI's chat and completions, OpenAI's Responses, Anthropic's Messages.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "examples/server/api_error.h"
#include "examples/server/openai_request.h"
#include "examples/server/openai_response.h"
#include "protocol/chat_reply.h"
#include "pagoda/request.h"

namespace pagoda::server {

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;  // of every completion the request ran
};

// A choice's end in a stream.
struct ChoiceEnd {
  int32_t index = 0;
  FinishReason finish = FinishReason::Length;  // a choice the server cancelled ends as Length
  std::string stop_string;                     // Completion::stop_string
  bool split = false;                          // a split reply (else plain text)
  chat::ChatReplySplitter::Delta rest;         // split: what the splitter held back to the end
  std::vector<chat::ParsedToolCall> calls;     // split: the reply's tool calls
  bool first = true;                           // nothing of this choice was sent yet
  const Usage* usage = nullptr;                // on the last choice: the request's usage
};

class ApiFormat {
 public:
  virtual ~ApiFormat() = default;

  // The body (JSON text) of a non-streamed answer.
  virtual std::string whole(const std::vector<Choice>& choices, const Usage& usage) = 0;

  // A stream's events (each one or more whole server-sent events): what opens it, a piece of
  // plain text (completions, chat without a reply to split, an echoed prompt), a piece of a
  // split reply, each choice's end, what closes it, and an error that ends it.
  virtual std::string stream_start(const Usage& usage) = 0;
  virtual std::string text_event(int32_t index, const std::string& text, bool first,
                                 const nlohmann::json& logprobs) = 0;
  virtual std::string reply_event(int32_t index, const chat::ChatReplySplitter::Delta& delta, bool first,
                                  const nlohmann::json& logprobs) = 0;
  virtual std::string choice_end(const ChoiceEnd& end) = 0;
  virtual std::string stream_end(const Usage& usage) = 0;
  virtual std::string error_event(const ApiError& error) = 0;
};

// The format of `request`'s API (its endpoint).
std::unique_ptr<ApiFormat> make_api_format(const ApiRequest& request, const ResponseHeader& header);

// One server-sent event: `data: JSON`, after `event: NAME` when a name is given (protocol/sse.h).
using protocol::sse_event;

}  // namespace pagoda::server
