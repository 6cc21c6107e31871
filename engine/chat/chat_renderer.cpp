#include "engine/chat/chat_renderer.h"

#include <algorithm>

#include "engine/util/json_depth.h"
#include "pagoda/error.h"

namespace pagoda::chat {

namespace {

using json = nlohmann::ordered_json;

json parse_json(const std::string& text, const char* what) {
  try {
    return parse_ordered_json_bounded(text, what);
  } catch (const json::exception& e) {
    throw Error(std::string(what) + " is not valid JSON: " + e.what());
  }
}

json arguments_value(const std::string& arguments) {
  json parsed = parse_ordered_json_bounded(arguments, "tool call arguments", false);
  if (parsed.is_object()) return parsed;
  return arguments;
}

// The context members whose strings are the chat's data: what the user sent, not the
// template's or the engine's own text.
std::vector<std::string> data_members(const ChatTemplateOptions& options) {
  if (options.special_in_content) return {};
  std::vector<std::string> names{"messages", "tools"};
  if (!options.kwargs.empty()) {
    const json kwargs = parse_json(options.kwargs, "chat template kwargs");
    if (kwargs.is_object()) {
      for (const auto& [name, value] : kwargs.items()) {
        // The engine sets these itself, after the kwargs.
        if (name != "add_generation_prompt" && name != "bos_token" && name != "eos_token") names.push_back(name);
      }
    }
  }
  return names;
}

bool has_null_content(const ChatMessage& m) { return m.content.empty() && !m.tool_calls.empty(); }

json message_object(const ChatMessage& m, bool null_content) {
  json o{{"role", m.role}};
  if (null_content && has_null_content(m)) {
    o["content"] = nullptr;
  } else {
    o["content"] = m.content;
  }
  if (!m.reasoning_content.empty()) o["reasoning_content"] = m.reasoning_content;
  if (!m.tool_calls.empty()) {
    json calls = json::array();
    for (const ToolCall& c : m.tool_calls) {
      calls.push_back(json{{"id", c.id},
                           {"type", "function"},
                           {"function", {{"name", c.name}, {"arguments", arguments_value(c.arguments)}}}});
    }
    o["tool_calls"] = std::move(calls);
  }
  if (!m.tool_call_id.empty()) o["tool_call_id"] = m.tool_call_id;
  if (!m.name.empty()) o["name"] = m.name;
  return o;
}

}  // namespace

json template_context(const std::vector<ChatMessage>& messages, const ChatTemplateOptions& options,
                      const std::string& bos_token, const std::string& eos_token, bool null_content) {
  json context = json::object();
  if (!options.kwargs.empty()) {
    json kwargs = parse_json(options.kwargs, "chat template kwargs");
    if (!kwargs.is_object()) throw Error("chat template kwargs must be a JSON object");
    context = std::move(kwargs);
  }
  json list = json::array();
  for (const ChatMessage& m : messages) list.push_back(message_object(m, null_content));
  context["messages"] = std::move(list);
  if (!options.tools.empty()) {
    json tools = parse_json(options.tools, "tools");
    if (!tools.is_array()) throw Error("tools must be a JSON array");
    context["tools"] = std::move(tools);
  }
  context["add_generation_prompt"] = options.add_generation_prompt;
  context["bos_token"] = bos_token;
  context["eos_token"] = eos_token;
  return context;
}

ChatPrompt render_chat_prompt(const jinja::Template& t, const std::vector<ChatMessage>& messages,
                              const ChatTemplateOptions& options, const std::string& bos_token,
                              const std::string& eos_token) {
  const std::vector<std::string> data = data_members(options);
  try {
    return t.render_with_spans(template_context(messages, options, bos_token, eos_token, true), data);
  } catch (const Error&) {
    // Templates written before OpenAI's null content (Qwen3's first one tests
    // `'</think>' in message.content`) fail on it; as llama.cpp does, give them "" instead.
    if (std::none_of(messages.begin(), messages.end(), has_null_content)) throw;
    return t.render_with_spans(template_context(messages, options, bos_token, eos_token, false), data);
  }
}

std::string render_chat(const jinja::Template& t, const std::vector<ChatMessage>& messages,
                        const ChatTemplateOptions& options, const std::string& bos_token,
                        const std::string& eos_token) {
  return render_chat_prompt(t, messages, options, bos_token, eos_token).text;
}

}  // namespace pagoda::chat
