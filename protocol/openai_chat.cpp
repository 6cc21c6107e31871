#include "protocol/openai_chat.h"

#include <algorithm>

#include "engine/util/json_depth.h"
#include "pagoda/error.h"
#include "protocol/json_fields.h"

namespace pagoda::chat {

namespace {

using json = nlohmann::ordered_json;

using protocol::field;

std::string where(size_t index, const char* name = nullptr) {
  return "'messages[" + std::to_string(index) + "]" + (name ? std::string(".") + name : std::string()) + "'";
}

// An image_url part's image: {"type": "image_url", "image_url": {"url": ...}} (or the URL as a
// string), taken into `images` with its marker appended to `text`.
void image_part(const json& part, const std::string& path, ChatImages* images, std::string& text) {
  if (!images) {
    throw Error(protocol::quoted(path) +
                " is an image, and this model takes no images (it was loaded without a "
                "vision projector, --mmproj)");
  }
  const json* url = field(part, "image_url");
  if (url && url->is_object()) url = field(*url, "url");
  if (!url || !url->is_string()) throw Error(protocol::quoted(path + ".image_url.url") + " must be a string");
  images->images.push_back(image_url_bytes(url->get<std::string>(), path + ".image_url.url"));
  text += images->marker;
}

// A message's content: a string, null, or a list of text and image_url parts.
std::string content_text(const json& content, size_t index, ChatImages* images) {
  if (content.is_null()) return {};
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw Error(where(index, "content") + " must be a string or a list of content parts");
  std::string text;
  for (size_t k = 0; k < content.size(); ++k) {
    const json& part = content[k];
    const std::string path = "messages[" + std::to_string(index) + "].content[" + std::to_string(k) + "]";
    if (part.is_object() && part.value("type", "") == "image_url") {
      image_part(part, path, images, text);
      continue;
    }
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string()) {
      throw Error(protocol::quoted(path) +
                  " must be a text part ({\"type\": \"text\", \"text\": ...}) or an image_url part");
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

// An assistant message's `tool_calls`; the arguments a JSON string (as OpenAI sends them) or an object.
std::vector<ToolCall> message_tool_calls(const json& calls, size_t index) {
  if (!calls.is_array()) throw Error(where(index, "tool_calls") + " must be a list");
  std::vector<ToolCall> out;
  for (const json& c : calls) {
    const json* f = c.is_object() ? field(c, "function") : nullptr;
    if (!f || !f->is_object() || !f->contains("name") || !(*f)["name"].is_string()) {
      throw Error(where(index, "tool_calls") +
                  " entries must be {\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}");
    }
    ToolCall call{.id = c.contains("id") && c["id"].is_string() ? c["id"].get<std::string>() : std::string(),
                  .name = (*f)["name"].get<std::string>(),
                  .arguments = "{}"};
    if (const json* a = field(*f, "arguments")) call.arguments = a->is_string() ? a->get<std::string>() : a->dump();
    // Arguments as JSON text are parsed when the template is rendered: bounded the same way
    // (text that is not JSON passes as it is).
    parse_json_bounded(call.arguments, where(index, "tool_calls") + " arguments", false);
    out.push_back(std::move(call));
  }
  return out;
}

std::string optional_string(const json& msg, const char* name, size_t index) {
  const json* v = field(msg, name);
  if (!v) return {};
  if (!v->is_string()) throw Error(where(index, name) + " must be a string");
  return v->get<std::string>();
}

const char* const kToolChoiceForms =
    "'tool_choice' must be 'none', 'auto', 'required' or {\"type\": \"function\", \"function\": {\"name\": ...}}";

}  // namespace

std::vector<ChatMessage> parse_messages(const json& messages, ChatImages* images) {
  if (!messages.is_array() || messages.empty()) throw Error("'messages' must be a non-empty list");
  // Before any dump() of tool-call arguments, which recurses.
  check_json_depth(messages, "'messages'");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& msg = messages[i];
    if (!msg.is_object() || !msg.contains("role") || !msg["role"].is_string()) {
      throw Error(where(i) + " must be an object with a string 'role'");
    }
    ChatMessage m{.role = msg["role"].get<std::string>(),
                  .content = content_text(msg.value("content", json(nullptr)), i, images)};
    if (const json* calls = field(msg, "tool_calls")) m.tool_calls = message_tool_calls(*calls, i);
    m.tool_call_id = optional_string(msg, "tool_call_id", i);
    m.name = optional_string(msg, "name", i);
    m.reasoning_content = optional_string(msg, "reasoning_content", i);
    out.push_back(std::move(m));
  }
  return out;
}

std::string template_kwargs(const json& body) {
  const json* k = field(body, "chat_template_kwargs");
  if (!k) return {};
  if (!k->is_object()) throw Error("'chat_template_kwargs' must be an object");
  check_json_depth(*k, "'chat_template_kwargs'");
  return k->dump();
}

std::optional<ToolRequest> parse_tool_request(const json& body, const std::optional<std::string>& chat_template) {
  const json* tools = field(body, "tools");
  const json* choice = field(body, "tool_choice");
  if (!tools) {
    if (choice && !(choice->is_string() && choice->get<std::string>() == "none"))
      throw Error("'tool_choice' needs 'tools'");
    return std::nullopt;
  }
  check_json_depth(*tools, "'tools'");
  ToolRequest t;
  t.tools.definitions = parse_tool_definitions(tools->dump());
  t.tools_json = tools->dump();
  std::string named;
  if (choice && choice->is_string()) {
    const std::string c = choice->get<std::string>();
    if (c == "none") return std::nullopt;
    if (c != "auto" && c != "required") throw Error(kToolChoiceForms);
    t.required = c == "required";
  } else if (choice) {
    const json* f =
        choice->is_object() && choice->value("type", "") == "function" ? field(*choice, "function") : nullptr;
    if (!f || !f->is_object() || !f->contains("name") || !(*f)["name"].is_string()) throw Error(kToolChoiceForms);
    named = (*f)["name"].get<std::string>();
    t.required = true;
  }
  if (!named.empty()) {
    auto& defs = t.tools.definitions;
    const auto it = std::find_if(defs.begin(), defs.end(), [&](const ToolDefinition& d) { return d.name == named; });
    if (it == defs.end()) throw Error("'tool_choice' names the function '" + named + "', which is not in 'tools'");
    defs = {*it};
  }
  if (const json* p = field(body, "parallel_tool_calls")) {
    if (!p->is_boolean()) throw Error("'parallel_tool_calls' must be a boolean");
    t.parallel = p->get<bool>();
  }
  t.tools.format = chat_template ? detect_tool_call_format(*chat_template) : ToolCallFormat::Generic;
  return t;
}

void offer_tools(const ToolRequest& tools, std::vector<ChatMessage>& messages, ChatTemplateOptions& options) {
  if (tools.tools.format != ToolCallFormat::Generic) {
    options.tools = tools.tools_json;
    return;
  }
  const std::string prompt = generic_tool_prompt(tools.tools_json);
  if (!messages.empty() && (messages[0].role == "system" || messages[0].role == "developer")) {
    messages[0].content += "\n\n" + prompt;
  } else {
    messages.insert(messages.begin(), ChatMessage{.role = "system", .content = prompt});
  }
}

ToolGrammar tool_request_grammar(const ToolRequest& tools,
                                 const std::function<bool(std::string_view)>& is_control_token,
                                 std::optional<std::string_view> answer_schema) {
  const std::string_view tag = tool_call_tag(tools.tools.format);
  const bool control_tag = !tag.empty() && is_control_token(tag);
  if (answer_schema && !tools.required) {
    return tool_or_answer_grammar(tools.tools.format, tools.tools.definitions, *answer_schema, tools.parallel,
                                  control_tag);
  }
  return tool_call_grammar(tools.tools.format, tools.tools.definitions, !tools.required, tools.parallel, control_tag);
}

std::optional<ReplyShape> reply_shape(const std::optional<std::string>& chat_template, std::string_view prompt,
                                      const std::optional<ToolRequest>& tools) {
  ReplyShape shape;
  shape.reasoning = chat_template && chat_template->find("<think>") != std::string::npos;
  if (shape.reasoning) {
    const size_t end = prompt.find_last_not_of(" \n\r\t");
    const std::string_view trimmed = prompt.substr(0, end == std::string_view::npos ? 0 : end + 1);
    shape.starts_in_reasoning = trimmed.size() >= 7 && trimmed.substr(trimmed.size() - 7) == "<think>";
  }
  if (tools) shape.tools = tools->tools;
  if (!shape.reasoning && !shape.tools) return std::nullopt;
  return shape;
}

}  // namespace pagoda::chat
