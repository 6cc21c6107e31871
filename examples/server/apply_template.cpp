#include "examples/server/apply_template.h"

#include "protocol/openai_chat.h"
#include "examples/server/api_error.h"
#include "examples/server/json_body.h"
#include "pagoda/error.h"

namespace pagoda::server {

using json = nlohmann::ordered_json;

json apply_template(const std::string& text, const Engine& engine, bool special_in_content) {
  json body = parse_request_body(text);
  if (!body.is_object()) throw bad_request("the body must be a JSON object");
  ChatTemplateOptions options;
  options.special_in_content = special_in_content;
  if (body.contains("add_generation_prompt")) {
    if (!body["add_generation_prompt"].is_boolean()) throw bad_request("'add_generation_prompt' must be a boolean");
    options.add_generation_prompt = body["add_generation_prompt"].get<bool>();
  }
  if (body.contains("tools") && !body["tools"].is_null()) {
    if (!body["tools"].is_array()) throw bad_request("'tools' must be a list");
    options.tools = body["tools"].dump();
  }
  std::vector<ChatMessage> messages;
  try {
    options.kwargs = chat::template_kwargs(body);
    if (!body.contains("messages")) throw Error("'messages' is required");
    messages = chat::parse_messages(body["messages"]);
  } catch (const Error& e) {
    throw bad_request(e.what());
  }
  try {
    const ChatPrompt prompt = engine.render_chat(messages, options);
    json spans = json::array();
    for (const TextSpan& s : prompt.data_spans) spans.push_back({s.begin, s.end});
    return json{{"prompt", prompt.text}, {"data_spans", std::move(spans)}};
  } catch (const Error& e) {
    throw bad_request(std::string("the chat template failed: ") + e.what());
  }
}

}  // namespace pagoda::server
