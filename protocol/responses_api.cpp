#include "protocol/responses_api.h"

#include <algorithm>
#include <random>
#include <utility>

#include "engine/util/json_depth.h"
#include "pagoda/error.h"
#include "protocol/json_fields.h"
#include "protocol/sse.h"

namespace pagoda::responses {

namespace {

using json = nlohmann::ordered_json;

using protocol::field;
using protocol::quoted;

std::string type_of(const json& item) {
  const json* t = item.is_object() ? field(item, "type") : nullptr;
  return t && t->is_string() ? t->get<std::string>() : std::string();
}

// A part's text: input_text and output_text (and a refusal, which is text the model wrote).
// Files and audio are refused (images are message content: message_content).
std::string part_text(const json& part, const std::string& path) {
  const std::string type = type_of(part);
  if (type == "input_image" || type == "input_file" || type == "input_audio") {
    throw Error(quoted(path) + " is an " + type + ": files and audio are not supported, and images only in messages");
  }
  const char* key = type == "refusal" ? "refusal" : "text";
  if (type != "input_text" && type != "output_text" && type != "refusal") {
    throw Error(quoted(path + ".type") + " must be 'input_text' or 'output_text', got " +
                (part.is_object() && part.contains("type") ? part["type"].dump() : std::string("none")));
  }
  const json* text = field(part, key);
  if (!text || !text->is_string()) throw Error(quoted(path + "." + key) + " must be a string");
  return text->get<std::string>();
}

// A message's content or a call's output: a string or a list of text parts, joined as chat
// joins its text parts.
std::string content_text(const json* content, const std::string& path) {
  if (!content) throw Error(quoted(path) + " is required");
  if (content->is_string()) return content->get<std::string>();
  if (!content->is_array()) throw Error(quoted(path) + " must be a string or a list of content parts");
  std::string text;
  for (size_t i = 0; i < content->size(); ++i) text += part_text((*content)[i], path + "[" + std::to_string(i) + "]");
  return text;
}

// A message's content as chat content: a string (text parts joined), or, with images, text and
// image_url parts. An input_image
// comes by URL (a data URL: protocol/image_parts.h); one by file_id is refused, as this server
// stores no files.
json message_content(const json* content, const std::string& path) {
  if (!content) throw Error(quoted(path) + " is required");
  if (content->is_string()) return *content;
  if (!content->is_array()) throw Error(quoted(path) + " must be a string or a list of content parts");
  json parts = json::array();
  bool has_image = false;
  for (size_t i = 0; i < content->size(); ++i) {
    const json& part = (*content)[i];
    const std::string where = path + "[" + std::to_string(i) + "]";
    if (type_of(part) != "input_image") {
      parts.push_back({{"type", "text"}, {"text", part_text(part, where)}});
      continue;
    }
    const json* url = field(part, "image_url");
    if (!url && field(part, "file_id")) {
      throw Error(quoted(where) +
                  " is an input_image by file_id: this server stores no files; send the image as a "
                  "data URL in 'image_url'");
    }
    if (!url || !url->is_string()) throw Error(quoted(where + ".image_url") + " must be a string");
    parts.push_back({{"type", "image_url"}, {"image_url", {{"url", *url}}}});
    has_image = true;
  }
  if (has_image) return parts;
  std::string text;  // text alone is joined, as chat joins its text parts
  for (const json& part : parts) text += part["text"].get<std::string>();
  return text;
}

std::string required_string(const json& item, const char* name, const std::string& path) {
  const json* v = field(item, name);
  if (!v || !v->is_string()) throw Error(quoted(path + "." + name) + " must be a string");
  return v->get<std::string>();
}

// `input` items → chat messages, in order.
class InputReader {
 public:
  json messages = json::array();

  void item(const json& item, const std::string& path) {
    if (!item.is_object()) throw Error(quoted(path) + " must be an object");
    const json* type = field(item, "type");
    if (type && !type->is_string()) throw Error(quoted(path + ".type") + " must be a string");
    const std::string t = type ? type->get<std::string>() : std::string("message");
    if (t == "message") {
      message(item, path);
    } else if (t == "function_call") {
      function_call(item, path);
    } else if (t == "function_call_output") {
      function_call_output(item, path);
    } else if (t == "reasoning") {
      reasoning(item);
    } else if (t == "item_reference") {
      throw Error(quoted(path) + " is an item_reference: this server does not store items (send the item itself)");
    } else {
      throw Error(quoted(path + ".type") + " '" + t +
                  "' is not supported: input items may be messages, function_call, function_call_output and "
                  "reasoning");
    }
  }

  void message(const json& item, const std::string& path) {
    const std::string role = required_string(item, "role", path);
    if (role != "user" && role != "assistant" && role != "system" && role != "developer") {
      throw Error(quoted(path + ".role") + " must be 'user', 'assistant', 'system' or 'developer', got '" + role + "'");
    }
    json m = {{"role", role == "developer" ? "system" : role},
              {"content", message_content(field(item, "content"), path + ".content")}};
    if (role == "assistant") take_reasoning(m);
    reasoning_.clear();  // thinking belongs to the assistant turn right after it
    messages.push_back(std::move(m));
  }

  // Consecutive calls are one assistant turn, with the assistant's text when it came just before.
  void function_call(const json& item, const std::string& path) {
    const std::string call_id = required_string(item, "call_id", path);
    const std::string name = required_string(item, "name", path);
    const json* arguments = field(item, "arguments");
    if (!arguments || (!arguments->is_string() && !arguments->is_object())) {
      throw Error(quoted(path + ".arguments") + " must be a string of JSON");
    }
    json call = {
        {"id", call_id},
        {"type", "function"},
        {"function",
         {{"name", name}, {"arguments", arguments->is_string() ? arguments->get<std::string>() : arguments->dump()}}}};
    names_.emplace_back(call_id, name);
    if (messages.empty() || messages.back()["role"] != "assistant") {
      messages.push_back({{"role", "assistant"}, {"content", nullptr}});
    }
    json& turn = messages.back();
    take_reasoning(turn);
    if (!turn.contains("tool_calls")) turn["tool_calls"] = json::array();
    turn["tool_calls"].push_back(std::move(call));
  }

  void function_call_output(const json& item, const std::string& path) {
    const std::string call_id = required_string(item, "call_id", path);
    json m = {{"role", "tool"},
              {"content", content_text(field(item, "output"), path + ".output")},
              {"tool_call_id", call_id}};
    // The function's name too, for templates that show it with the result.
    for (const auto& [id, name] : names_) {
      if (id == call_id) m["name"] = name;
    }
    reasoning_.clear();
    messages.push_back(std::move(m));
  }

  // The thinking of a reasoning item (its reasoning_text parts; a summary is not the thinking).
  void reasoning(const json& item) {
    const json* content = field(item, "content");
    if (!content || !content->is_array()) return;
    for (const json& part : *content) {
      if (type_of(part) == "reasoning_text" && part.contains("text") && part["text"].is_string())
        reasoning_ += part["text"].get<std::string>();
    }
  }

 private:
  void take_reasoning(json& turn) {
    if (!reasoning_.empty() && !turn.contains("reasoning_content")) turn["reasoning_content"] = reasoning_;
    reasoning_.clear();
  }

  std::string reasoning_;
  std::vector<std::pair<std::string, std::string>> names_;  // call_id → function name
};

json chat_messages(const json& body) {
  InputReader reader;
  if (const json* instructions = field(body, "instructions")) {
    if (!instructions->is_string()) throw Error("'instructions' must be a string");
    reader.messages.push_back({{"role", "system"}, {"content", *instructions}});
  }
  const json* input = field(body, "input");
  if (!input) throw Error("'input' is required");
  if (input->is_string()) {
    reader.messages.push_back({{"role", "user"}, {"content", *input}});
  } else if (input->is_array()) {
    if (input->empty()) throw Error("'input' is an empty list");
    for (size_t i = 0; i < input->size(); ++i) reader.item((*input)[i], "input[" + std::to_string(i) + "]");
  } else {
    throw Error("'input' must be a string or a list of input items");
  }
  return std::move(reader.messages);
}

// Function tools as chat's {"type": "function", "function": {...}}, their fields in the order sent.
json chat_tools(const json& tools) {
  if (!tools.is_array()) throw Error("'tools' must be a list");
  json out = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string path = "tools[" + std::to_string(i) + "]";
    const json& tool = tools[i];
    const std::string type = type_of(tool);
    if (type.empty()) throw Error(quoted(path) + " must be an object with a string 'type'");
    if (type != "function") {
      throw Error(quoted(path) + " is a '" + type +
                  "' tool: only function tools are supported (this server runs no hosted tools)");
    }
    required_string(tool, "name", path);
    json function = json::object();
    for (const auto& [key, value] : tool.items()) {
      if (key != "type") function[key] = value;
    }
    out.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  return out;
}

// `tool_choice` and the tools it leaves in `chat`. allowed_tools narrows the tools to those it
// names, with "auto" or "required" among them. An empty tool list is no tools (agent frameworks
// send one, where chat refuses it), and so "auto" and "none" without tools are nothing.
void chat_tool_choice(const json& choice, json& chat) {
  const std::string type = type_of(choice);
  if (choice.is_string()) {
    const bool idle = choice == "auto" || choice == "none";
    if (chat.contains("tools") || !idle) chat["tool_choice"] = choice;  // chat's own words
  } else if (type == "function") {
    chat["tool_choice"] = {{"type", "function"},
                           {"function", {{"name", required_string(choice, "name", "tool_choice")}}}};
  } else if (type == "allowed_tools") {
    const std::string mode = required_string(choice, "mode", "tool_choice");
    if (mode != "auto" && mode != "required") throw Error("'tool_choice.mode' must be 'auto' or 'required'");
    const json* allowed = field(choice, "tools");
    if (!allowed || !allowed->is_array() || allowed->empty())
      throw Error("'tool_choice.tools' must be a non-empty list of {\"type\": \"function\", \"name\": ...}");
    std::vector<std::string> names;
    const json tools = chat.value("tools", json::array());
    for (size_t i = 0; i < allowed->size(); ++i) {
      const std::string path = "tool_choice.tools[" + std::to_string(i) + "]";
      names.push_back(required_string((*allowed)[i], "name", path));
      const bool known =
          std::any_of(tools.begin(), tools.end(), [&](const json& t) { return t["function"]["name"] == names.back(); });
      if (!known) throw Error(quoted(path) + " names '" + names.back() + "', which is not in 'tools'");
    }
    // In the order of `tools`, as the prompt shows them without the narrowing.
    json kept = json::array();
    for (const json& tool : tools) {
      if (std::find(names.begin(), names.end(), tool["function"]["name"]) != names.end()) kept.push_back(tool);
    }
    chat["tools"] = std::move(kept);
    chat["tool_choice"] = mode;
  } else {
    throw Error(
        "'tool_choice' must be 'auto', 'none', 'required', {\"type\": \"function\", \"name\": ...} or "
        "{\"type\": \"allowed_tools\", ...}" +
        (type.empty() ? std::string() : ", got the type '" + type + "'"));
  }
}

// `text.format` as chat's response_format; nothing for plain text.
json response_format(const json& text) {
  if (!text.is_object()) throw Error("'text' must be an object");
  const json* format = field(text, "format");
  if (!format) return nullptr;
  const std::string type = type_of(*format);
  if (type.empty()) throw Error("'text.format' must be an object with a string 'type'");
  if (type == "text") return nullptr;
  if (type == "json_object") return {{"type", "json_object"}};
  if (type != "json_schema") {
    throw Error("'text.format.type' must be 'text', 'json_object' or 'json_schema', got '" + type + "'");
  }
  const json* schema = field(*format, "schema");
  if (!schema || (!schema->is_object() && !schema->is_boolean())) {
    throw Error("'text.format.schema' must be a JSON Schema object");
  }
  json spec = json::object();
  for (const auto& [key, value] : format->items()) {
    if (key != "type") spec[key] = value;
  }
  return {{"type", "json_schema"}, {"json_schema", std::move(spec)}};
}

// What needs responses stored, or running after the connection closes.
void refuse_stateful(const json& body) {
  if (field(body, "previous_response_id")) {
    throw Error(
        "previous_response_id is not supported: this server does not store responses (send the whole conversation "
        "as input)");
  }
  if (field(body, "conversation")) {
    throw Error(
        "'conversation' is not supported: this server does not store conversations (send the whole conversation as "
        "input)");
  }
  if (const json* b = field(body, "background"); b && (!b->is_boolean() || b->get<bool>())) {
    throw Error("'background' responses are not supported: this server answers while the request is open");
  }
  if (field(body, "prompt")) {
    throw Error("'prompt' (a stored prompt template) is not supported: send 'instructions' and 'input'");
  }
}

// Sampling fields the Responses API shares with chat, and pagoda's (vLLM's, llama-server's)
// extensions, which a client may send to either.
constexpr const char* kCarriedOver[] = {"temperature",
                                        "top_p",
                                        "seed",
                                        "stream",
                                        "top_k",
                                        "min_p",
                                        "min_tokens",
                                        "repetition_penalty",
                                        "presence_penalty",
                                        "frequency_penalty",
                                        "logit_bias",
                                        "stop",
                                        "stop_token_ids",
                                        "ignore_eos",
                                        "chat_template_kwargs",
                                        "grammar"};

}  // namespace

json responses_to_chat(const json& body) {
  if (!body.is_object()) throw Error("the body must be a JSON object");
  check_json_depth(body, "the body");
  refuse_stateful(body);
  json chat = json::object();
  if (const json* model = field(body, "model")) chat["model"] = *model;
  chat["messages"] = chat_messages(body);
  if (const json* tools = field(body, "tools"); tools && !(tools->is_array() && tools->empty()))
    chat["tools"] = chat_tools(*tools);
  if (const json* choice = field(body, "tool_choice")) chat_tool_choice(*choice, chat);
  if (const json* parallel = field(body, "parallel_tool_calls")) chat["parallel_tool_calls"] = *parallel;
  if (const json* text = field(body, "text")) {
    json format = response_format(*text);
    if (!format.is_null()) chat["response_format"] = std::move(format);
  }
  if (const json* max = field(body, "max_output_tokens")) {
    if (!max->is_number_integer() || max->get<int64_t>() < 1) {
      throw Error("'max_output_tokens' must be a positive integer, got " + max->dump());
    }
    chat["max_tokens"] = *max;
  }
  for (const char* name : kCarriedOver) {
    if (const json* v = field(body, name)) chat[name] = *v;
  }
  return chat;
}

json response_settings(const json& body) {
  auto or_default = [&](const char* name, json fallback) {
    const json* v = field(body, name);
    return v ? *v : fallback;
  };
  const json* text = field(body, "text");
  const json* format = text ? field(*text, "format") : nullptr;
  const json* metadata = field(body, "metadata");
  return {{"instructions", or_default("instructions", nullptr)},
          {"max_output_tokens", or_default("max_output_tokens", nullptr)},
          {"parallel_tool_calls", or_default("parallel_tool_calls", true)},
          {"temperature", or_default("temperature", 1.0)},
          {"text", {{"format", format ? *format : json{{"type", "text"}}}}},
          {"tool_choice", or_default("tool_choice", "auto")},
          {"tools", or_default("tools", json::array())},
          {"top_p", or_default("top_p", 1.0)},
          {"metadata", metadata && metadata->is_object() ? *metadata : json::object()}};
}

std::string new_response_id() {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng(std::random_device{}());
  std::string id = "resp_";
  for (int i = 0; i < 32; ++i) id += kAlphabet[rng() % (sizeof(kAlphabet) - 1)];
  return id;
}

namespace {

// Item ids share the response's random part, so they are unique as the response id is and the
// same in a stream and in the whole response.
std::string item_id(const ResponseInfo& info, const char* prefix) {
  const size_t cut = info.id.find('_');
  return prefix + (cut == std::string::npos ? info.id : info.id.substr(cut + 1));
}

std::string call_item_id(const ResponseInfo& info, size_t i) { return item_id(info, "fc_") + "_" + std::to_string(i); }

// The id the client answers a call with: the model's own (Mistral writes one), else the response's.
std::string call_id(const ResponseInfo& info, const chat::ParsedToolCall& call, size_t i) {
  return call.id.empty() ? item_id(info, "call_") + "_" + std::to_string(i) : call.id;
}

json reasoning_part(const std::string& text) { return {{"type", "reasoning_text"}, {"text", text}}; }

json text_part(const std::string& text) {
  return {{"type", "output_text"}, {"annotations", json::array()}, {"logprobs", json::array()}, {"text", text}};
}

json reasoning_item(const ResponseInfo& info, const std::string& text) {
  json content = json::array();
  if (!text.empty()) content.push_back(reasoning_part(text));
  return {{"id", item_id(info, "rs_")}, {"type", "reasoning"}, {"summary", json::array()}, {"content", content}};
}

json message_item(const ResponseInfo& info, const std::string& text, const char* status) {
  json content = json::array();
  if (status != std::string_view("in_progress")) content.push_back(text_part(text));
  return {{"id", item_id(info, "msg_")},
          {"type", "message"},
          {"status", status},
          {"content", content},
          {"role", "assistant"}};
}

json call_item(const ResponseInfo& info, const chat::ParsedToolCall& call, size_t i, bool done) {
  return {{"id", call_item_id(info, i)},
          {"type", "function_call"},
          {"status", done ? "completed" : "in_progress"},
          {"arguments", done ? call.arguments : std::string()},
          {"call_id", call_id(info, call, i)},
          {"name", call.name}};
}

const char* message_status(const ResponseOutput& output) { return output.cut_by_length ? "incomplete" : "completed"; }

json output_items(const ResponseInfo& info, const ResponseOutput& output) {
  json items = json::array();
  if (!output.reasoning.empty()) items.push_back(reasoning_item(info, output.reasoning));
  if (!output.text.empty()) items.push_back(message_item(info, output.text, message_status(output)));
  for (size_t i = 0; i < output.calls.size(); ++i) items.push_back(call_item(info, output.calls[i], i, true));
  return items;
}

json usage_json(const ResponseUsage& usage) {
  return {{"input_tokens", usage.input_tokens},
          {"input_tokens_details", {{"cached_tokens", 0}}},
          {"output_tokens", usage.output_tokens},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", usage.input_tokens + usage.output_tokens}};
}

// The response object in any state, its fields in the order OpenAI writes them.
json response_object(const ResponseInfo& info, const char* status, json output, json usage, json error = nullptr,
                     json incomplete = nullptr) {
  const json& s = info.settings;
  auto setting = [&](const char* name) { return s.contains(name) ? s[name] : json(nullptr); };
  return {{"id", info.id},
          {"object", "response"},
          {"created_at", info.created_at},
          {"status", status},
          {"background", false},
          {"error", std::move(error)},
          {"incomplete_details", std::move(incomplete)},
          {"instructions", setting("instructions")},
          {"max_output_tokens", setting("max_output_tokens")},
          {"model", info.model},
          {"output", std::move(output)},
          {"parallel_tool_calls", s.value("parallel_tool_calls", true)},
          {"previous_response_id", nullptr},
          {"store", false},
          {"temperature", s.contains("temperature") ? s["temperature"] : json(1.0)},
          {"text", s.contains("text") ? s["text"] : json{{"format", {{"type", "text"}}}}},
          {"tool_choice", s.contains("tool_choice") ? s["tool_choice"] : json("auto")},
          {"tools", s.contains("tools") ? s["tools"] : json::array()},
          {"top_p", s.contains("top_p") ? s["top_p"] : json(1.0)},
          {"truncation", "disabled"},
          {"usage", std::move(usage)},
          {"metadata", s.contains("metadata") ? s["metadata"] : json::object()}};
}

}  // namespace

json response_json(const ResponseInfo& info, const ResponseOutput& output, const ResponseUsage& usage) {
  if (output.cut_by_length) {
    return response_object(info, "incomplete", output_items(info, output), usage_json(usage), nullptr,
                           {{"reason", "max_output_tokens"}});
  }
  return response_object(info, "completed", output_items(info, output), usage_json(usage));
}

ResponseEventWriter::ResponseEventWriter(ResponseInfo info) : info_(std::move(info)) {}

json ResponseEventWriter::event(const char* type, json fields) {
  json e = {{"type", type}, {"sequence_number", sequence_++}};
  for (auto& [key, value] : fields.items()) e[key] = std::move(value);
  return e;
}

int32_t ResponseEventWriter::output_index() const {
  // The open item is the last one: reasoning (0), then the message.
  return int32_t(had_reasoning_) + int32_t(had_message_) - 1;
}

ResponseEventWriter::Events ResponseEventWriter::start() {
  Events out;
  out.push_back(
      event("response.created", {{"response", response_object(info_, "in_progress", json::array(), nullptr)}}));
  out.push_back(
      event("response.in_progress", {{"response", response_object(info_, "in_progress", json::array(), nullptr)}}));
  return out;
}

ResponseEventWriter::Events ResponseEventWriter::reasoning(std::string_view delta) {
  if (delta.empty()) return {};
  if (open_ == Open::Message || had_message_) return text(delta);
  Events out;
  const std::string id = item_id(info_, "rs_");
  if (open_ == Open::None) {
    open_ = Open::Reasoning;
    had_reasoning_ = true;
    out.push_back(
        event("response.output_item.added", {{"output_index", output_index()}, {"item", reasoning_item(info_, "")}}));
    out.push_back(
        event("response.content_part.added",
              {{"item_id", id}, {"output_index", output_index()}, {"content_index", 0}, {"part", reasoning_part("")}}));
  }
  output_.reasoning += delta;
  out.push_back(event("response.reasoning_text.delta",
                      {{"item_id", id}, {"output_index", output_index()}, {"content_index", 0}, {"delta", delta}}));
  return out;
}

ResponseEventWriter::Events ResponseEventWriter::text(std::string_view delta) {
  if (delta.empty()) return {};
  Events out;
  const std::string id = item_id(info_, "msg_");
  if (open_ != Open::Message) {
    close(out);
    open_ = Open::Message;
    had_message_ = true;
    out.push_back(event("response.output_item.added",
                        {{"output_index", output_index()}, {"item", message_item(info_, "", "in_progress")}}));
    out.push_back(
        event("response.content_part.added",
              {{"item_id", id}, {"output_index", output_index()}, {"content_index", 0}, {"part", text_part("")}}));
  }
  output_.text += delta;
  out.push_back(event("response.output_text.delta", {{"item_id", id},
                                                     {"output_index", output_index()},
                                                     {"content_index", 0},
                                                     {"delta", delta},
                                                     {"logprobs", json::array()}}));
  return out;
}

void ResponseEventWriter::close(Events& out) {
  if (open_ == Open::Reasoning) {
    const std::string id = item_id(info_, "rs_");
    out.push_back(
        event("response.reasoning_text.done",
              {{"item_id", id}, {"output_index", output_index()}, {"content_index", 0}, {"text", output_.reasoning}}));
    out.push_back(event("response.content_part.done", {{"item_id", id},
                                                       {"output_index", output_index()},
                                                       {"content_index", 0},
                                                       {"part", reasoning_part(output_.reasoning)}}));
    out.push_back(event("response.output_item.done",
                        {{"output_index", output_index()}, {"item", reasoning_item(info_, output_.reasoning)}}));
  } else if (open_ == Open::Message) {
    const std::string id = item_id(info_, "msg_");
    out.push_back(event("response.output_text.done", {{"item_id", id},
                                                      {"output_index", output_index()},
                                                      {"content_index", 0},
                                                      {"text", output_.text},
                                                      {"logprobs", json::array()}}));
    out.push_back(event(
        "response.content_part.done",
        {{"item_id", id}, {"output_index", output_index()}, {"content_index", 0}, {"part", text_part(output_.text)}}));
    out.push_back(event(
        "response.output_item.done",
        {{"output_index", output_index()}, {"item", message_item(info_, output_.text, message_status(output_))}}));
  }
  open_ = Open::None;
}

ResponseEventWriter::Events ResponseEventWriter::end(const std::vector<chat::ParsedToolCall>& calls,
                                                     bool cut_by_length) {
  Events out;
  output_.cut_by_length = cut_by_length;  // before close(): the message's status says it
  close(out);
  output_.calls = calls;
  const int32_t first = int32_t(had_reasoning_) + int32_t(had_message_);
  for (size_t i = 0; i < calls.size(); ++i) {
    const int32_t index = first + int32_t(i);
    const std::string id = call_item_id(info_, i);
    out.push_back(
        event("response.output_item.added", {{"output_index", index}, {"item", call_item(info_, calls[i], i, false)}}));
    out.push_back(event("response.function_call_arguments.delta",
                        {{"item_id", id}, {"output_index", index}, {"delta", calls[i].arguments}}));
    out.push_back(
        event("response.function_call_arguments.done",
              {{"item_id", id}, {"output_index", index}, {"name", calls[i].name}, {"arguments", calls[i].arguments}}));
    out.push_back(
        event("response.output_item.done", {{"output_index", index}, {"item", call_item(info_, calls[i], i, true)}}));
  }
  return out;
}

ResponseEventWriter::Events ResponseEventWriter::finish(const ResponseUsage& usage) {
  return {event(output_.cut_by_length ? "response.incomplete" : "response.completed",
                {{"response", response_json(info_, output_, usage)}})};
}

ResponseEventWriter::Events ResponseEventWriter::fail(const std::string& code, const std::string& message) {
  Events out;
  out.push_back(event("error", {{"code", code}, {"message", message}, {"param", nullptr}}));
  out.push_back(
      event("response.failed", {{"response", response_object(info_, "failed", output_items(info_, output_), nullptr,
                                                             {{"code", code}, {"message", message}})}}));
  return out;
}

std::string sse_event(const json& event) {
  return protocol::sse_event(event, event.value("type", std::string("message")));
}

}  // namespace pagoda::responses
