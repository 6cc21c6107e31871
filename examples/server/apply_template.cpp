#include "examples/server/apply_template.h"

#include "examples/server/api_error.h"
#include "pagoda/error.h"

namespace pagoda::server {

namespace {

using nlohmann::json;

std::string at(size_t i) { return "'messages[" + std::to_string(i) + "]"; }

// A message's content: a string, null, or OpenAI's list of parts, of which the text parts
// count (joined without separators).
std::string content_text(const json& content, size_t i) {
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw bad_request(at(i) + ".content' must be a string or a list of parts");
  std::string text;
  for (const json& part : content) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string()) {
      throw bad_request(at(i) + ".content' parts must be {\"type\": \"text\", \"text\": ...}");
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

std::string string_field(const json& msg, const char* name, size_t i) {
  if (!msg.contains(name) || msg[name].is_null()) return "";
  if (!msg[name].is_string()) throw bad_request(at(i) + "." + name + "' must be a string");
  return msg[name].get<std::string>();
}

std::vector<ToolCall> tool_calls(const json& calls, size_t i) {
  if (calls.is_null()) return {};
  if (!calls.is_array()) throw bad_request(at(i) + ".tool_calls' must be a list");
  std::vector<ToolCall> out;
  for (const json& c : calls) {
    const json* f = c.is_object() && c.contains("function") && c["function"].is_object() ? &c["function"] : nullptr;
    if (!f || !f->contains("name") || !(*f)["name"].is_string()) {
      throw bad_request(at(i) + ".tool_calls' entries need a function with a string name");
    }
    ToolCall call;
    call.id = c.contains("id") && c["id"].is_string() ? c["id"].get<std::string>() : "";
    call.name = (*f)["name"].get<std::string>();
    const json arguments = f->value("arguments", json::object());
    call.arguments = arguments.is_string() ? arguments.get<std::string>() : arguments.dump();
    out.push_back(std::move(call));
  }
  return out;
}

std::vector<ChatMessage> messages_of(const json& body) {
  if (!body.contains("messages") || !body["messages"].is_array()) throw bad_request("'messages' must be a list");
  std::vector<ChatMessage> out;
  const json& list = body["messages"];
  for (size_t i = 0; i < list.size(); ++i) {
    const json& msg = list[i];
    if (!msg.is_object() || !msg.contains("role") || !msg["role"].is_string()) {
      throw bad_request(at(i) + "' must be an object with a string 'role'");
    }
    ChatMessage m;
    m.role = msg["role"].get<std::string>();
    m.content = content_text(msg.value("content", json(nullptr)), i);
    m.tool_calls = tool_calls(msg.value("tool_calls", json(nullptr)), i);
    m.tool_call_id = string_field(msg, "tool_call_id", i);
    m.name = string_field(msg, "name", i);
    m.reasoning_content = string_field(msg, "reasoning_content", i);
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

json apply_template(const std::string& text, const Engine& engine) {
  json body;
  try {
    body = json::parse(text);
  } catch (const json::exception& e) {
    throw bad_request(std::string("the body is not valid JSON: ") + e.what());
  }
  if (!body.is_object()) throw bad_request("the body must be a JSON object");
  ChatTemplateOptions options;
  if (body.contains("add_generation_prompt")) {
    if (!body["add_generation_prompt"].is_boolean()) throw bad_request("'add_generation_prompt' must be a boolean");
    options.add_generation_prompt = body["add_generation_prompt"].get<bool>();
  }
  if (body.contains("tools") && !body["tools"].is_null()) {
    if (!body["tools"].is_array()) throw bad_request("'tools' must be a list");
    options.tools = body["tools"].dump();
  }
  if (body.contains("chat_template_kwargs") && !body["chat_template_kwargs"].is_null()) {
    if (!body["chat_template_kwargs"].is_object()) throw bad_request("'chat_template_kwargs' must be an object");
    options.kwargs = body["chat_template_kwargs"].dump();
  }
  const std::vector<ChatMessage> messages = messages_of(body);
  try {
    return json{{"prompt", engine.apply_chat_template(messages, options)}};
  } catch (const Error& e) {
    throw bad_request(std::string("the chat template failed: ") + e.what());
  }
}

}  // namespace pagoda::server
