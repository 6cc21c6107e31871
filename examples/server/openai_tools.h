#pragma once
// OpenAI's `tools`, `tool_choice` and `parallel_tool_calls` on a chat request: which tools the
// template is shown, the layout the model writes calls in (engine/chat/tool_calls), and the
// grammar its reply runs under — lazily from the layout's opening tag with "auto" (the model
// may answer in prose), over the whole reply with "required" or a named function, so even a
// model that never saw the tools returns a call whose arguments fit their schema.

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/chat/chat_reply.h"
#include "pagoda/engine.h"
#include "pagoda/request.h"

namespace pagoda::server {

struct ToolRequest {
  std::string tools_json;  // the tools offered, as the template's `tools` (all of them)
  chat::ReplyShape::Tools tools;  // the layout, and the tools a call may name
  bool required = false;   // "required" or a named function: the reply is a call
  bool parallel = true;    // parallel_tool_calls: several calls in one reply
};

// nullopt without `tools`, or with tool_choice "none". Throws ApiError (400) naming the field
// for malformed tools, an unknown tool_choice, or a named function that is not offered.
std::optional<ToolRequest> parse_tool_request(const nlohmann::json& body, const Engine& engine);

// Sets the request's grammar (and triggers, with "auto") for the calls. Throws ApiError (400)
// when a tool's parameters cannot be compiled to a grammar.
void constrain_tool_calls(const ToolRequest& tools, const Engine& engine, Request& r);

}  // namespace pagoda::server
