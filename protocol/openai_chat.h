#pragma once
// OpenAI's chat-completion fields that shape the prompt and the reply, read the same way for
// pagoda-server and the Python package: the messages (text, text parts, tool calls, tool
// turns), `chat_template_kwargs`, and `tools` / `tool_choice` / `parallel_tool_calls` — which
// tools the template is shown, the layout calls are written in (protocol/tool_calls) and the
// grammar a reply runs under: lazily from the layout's opening tag with "auto" (the model may
// answer in prose), over the whole reply with "required" or a named function.
//
// Malformed fields are pagoda::Error naming the field ('messages[2].tool_calls' ...); the
// server answers them with 400. So are fields nested deeper than kMaxJsonDepth
// (engine/util/json_depth.h), checked before anything walks them recursively.

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol/chat_reply.h"
#include "protocol/image_parts.h"
#include "protocol/tool_calls.h"
#include "pagoda/chat.h"

namespace pagoda::chat {

// OpenAI's `messages`: a non-empty list of {"role", "content" (a string, null, or text and
// image_url parts), "tool_calls"?, "tool_call_id"?, "name"?, "reasoning_content"?}. Images go to
// `images` (protocol/image_parts.h), each leaving its marker in the content where it stood;
// without `images` (a model that takes none) an image part is an error saying so.
std::vector<ChatMessage> parse_messages(const nlohmann::ordered_json& messages, ChatImages* images = nullptr);

// `chat_template_kwargs` (an object, or absent) as ChatTemplateOptions::kwargs.
std::string template_kwargs(const nlohmann::ordered_json& body);

struct ToolRequest {
  std::string tools_json;   // every tool offered, for the template's `tools`
  ReplyShape::Tools tools;  // the layout, and the tools a call may name
  bool required = false;    // "required" or a named function: the reply is a call
  bool parallel = true;     // parallel_tool_calls
};

// nullopt without `tools` or with tool_choice "none". `chat_template` (the template in use)
// decides the layout: Generic without one.
std::optional<ToolRequest> parse_tool_request(const nlohmann::ordered_json& body,
                                              const std::optional<std::string>& chat_template);

// The messages and options to render for a request with these tools: a Generic layout is taught
// in the system message, the others get the template's `tools`.
void offer_tools(const ToolRequest& tools, std::vector<ChatMessage>& messages, ChatTemplateOptions& options);

// The grammar (and its triggers, for "auto") of the request's calls. `is_control_token(text)`:
// whether the text is one control token of the vocabulary (Mistral's [TOOL_CALLS]), which a
// grammar cannot write. With an `answer_schema` (response_format's), "auto" admits calls or one
// value of that schema, and a required call ignores it. Throws pagoda::Error naming what does not
// compile: a tool's parameters or the schema.
ToolGrammar tool_request_grammar(const ToolRequest& tools,
                                 const std::function<bool(std::string_view)>& is_control_token,
                                 std::optional<std::string_view> answer_schema = std::nullopt);

// What a reply to `prompt` may hold besides text: thinking (a template with <think> blocks, and
// whether the prompt already opened one) and tool calls; nullopt when neither.
std::optional<ReplyShape> reply_shape(const std::optional<std::string>& chat_template, std::string_view prompt,
                                      const std::optional<ToolRequest>& tools);

}  // namespace pagoda::chat
