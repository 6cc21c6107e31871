#pragma once
// OpenAI's Responses API (POST /v1/responses), stateless: a request body translated into the
// chat-completions body it means, so it runs through the one chat request parser, and the
// answer's JSON: the whole `response` object and the events of its stream.
//
// Stateless: nothing is stored, so `previous_response_id`, `conversation` and `background` are
// refused (the client sends the whole conversation as `input`), and a response says
// `store: false` even when the request asked to store it.
//
// Malformed or unsupported fields are pagoda::Error naming the field ('input[2].call_id' ...);
// the server answers them with 400. Objects keep the order they were sent in (ordered_json),
// so tools and schemas reach the template and the grammar as the client wrote them.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol/tool_calls.h"

namespace pagoda::responses {

// A Responses body → the chat-completions body it asks for: `instructions` and `input` become
// `messages` (developer turns as system ones, function_call items as an assistant message's
// tool_calls, function_call_output items as tool messages, reasoning items as the next
// assistant message's reasoning_content); function `tools`, `tool_choice` (allowed_tools as
// the tools it names), `parallel_tool_calls`, `text.format` (as response_format), `max_output_tokens` (as
// max_tokens), `temperature`, `top_p`, `seed`, `stream` and pagoda's sampling extensions are
// carried over. Fields a stateless text server cannot honour (images, files, hosted tools,
// stored responses) are refused by name; bookkeeping ones (metadata, include, user, ...) are
// ignored.
nlohmann::ordered_json responses_to_chat(const nlohmann::ordered_json& body);

// The request's settings a response repeats: instructions, tools, tool_choice,
// parallel_tool_calls, temperature, top_p, max_output_tokens, text, metadata, with OpenAI's
// defaults for those not sent. `body` must have passed responses_to_chat.
nlohmann::ordered_json response_settings(const nlohmann::ordered_json& body);

// What identifies one response; its items' ids derive from `id`.
struct ResponseInfo {
  std::string id;          // "resp_…" (new_response_id)
  int64_t created_at = 0;  // Unix seconds
  std::string model;
  nlohmann::ordered_json settings = nlohmann::ordered_json::object();  // response_settings
};

// "resp_" and 32 random letters and digits.
std::string new_response_id();

// What the model replied, split by chat::ChatReplySplitter.
struct ResponseOutput {
  std::string reasoning;
  std::string text;
  std::vector<chat::ParsedToolCall> calls;
  bool cut_by_length = false;  // max_output_tokens (or the context) ended it: status "incomplete"
};

struct ResponseUsage {
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
};

// The whole `response` object: status "completed", or "incomplete" with incomplete_details
// when cut by length; output items in the order the model wrote them (a reasoning item when it
// thought, a message when it wrote text, a function_call per call); usage; the settings.
nlohmann::ordered_json response_json(const ResponseInfo& info, const ResponseOutput& output,
                                     const ResponseUsage& usage);

// The events of a streamed response, each a JSON object with its `type` and a running
// `sequence_number`: response.created and response.in_progress; per output item
// output_item.added, its content (content_part.added, reasoning_text / output_text deltas and
// done, content_part.done; function_call_arguments delta and done), output_item.done; then
// response.completed or response.incomplete, holding what response_json gives for the same
// output, so a stream adds up to the unstreamed response. An error ends it with `error` and
// response.failed.
class ResponseEventWriter {
 public:
  explicit ResponseEventWriter(ResponseInfo info);

  using Events = std::vector<nlohmann::ordered_json>;

  Events start();
  // Pieces of the reply as the splitter releases them: thinking comes before text (the
  // splitter's order); thinking after text is sent as text, so nothing is lost.
  Events reasoning(std::string_view delta);
  Events text(std::string_view delta);
  // The reply ended: closes the open item and sends the calls, which are known only now.
  Events end(const std::vector<chat::ParsedToolCall>& calls, bool cut_by_length);
  // The last event: the whole response (end() first).
  Events finish(const ResponseUsage& usage);
  // The response failed: an `error` event, then response.failed.
  Events fail(const std::string& code, const std::string& message);

  const ResponseOutput& output() const { return output_; }

 private:
  enum class Open { None, Reasoning, Message };

  nlohmann::ordered_json event(const char* type, nlohmann::ordered_json fields);
  void close(Events& out);
  int32_t output_index() const;

  ResponseInfo info_;
  ResponseOutput output_;
  Open open_ = Open::None;
  bool had_reasoning_ = false;
  bool had_message_ = false;
  int64_t sequence_ = 0;
};

// One server-sent event: `event: <type>` and the event as `data:` (invalid UTF-8 in a token's
// piece replaced, as the server's other answers do).
std::string sse_event(const nlohmann::ordered_json& event);

}  // namespace pagoda::responses
