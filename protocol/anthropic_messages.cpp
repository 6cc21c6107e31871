#include "protocol/anthropic_messages.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <utility>

#include "engine/util/json_depth.h"
#include "pagoda/error.h"
#include "protocol/json_fields.h"

namespace pagoda::anthropic {

namespace {

using json = nlohmann::ordered_json;

using protocol::field;
using protocol::quoted;
using protocol::string_field;

// A block's text: {"type": "text", "text": ...}.
json text_part(const json& block, const std::string& path) {
  return {{"type", "text"}, {"text", string_field(block, "text", path)}};
}

// A tool_result's `content`: a string, or text blocks (images are not supported).
json tool_result_text(const json& block, const std::string& path) {
  const json* content = field(block, "content");
  if (!content) return "";
  if (content->is_string()) return *content;
  if (!content->is_array()) throw Error(quoted(path + ".content") + " must be a string or a list of text blocks");
  json parts = json::array();
  for (size_t k = 0; k < content->size(); ++k) {
    const json& part = (*content)[k];
    const std::string where = path + ".content[" + std::to_string(k) + "]";
    if (!part.is_object() || part.value("type", "") != "text") {
      throw Error(quoted(where) + " must be a text block: only text tool results are supported");
    }
    parts.push_back(text_part(part, where));
  }
  return parts;
}

// An image block as a chat image_url part: its base64 source as a data URL. A source by URL is
// refused, as pagoda fetches nothing over the network (protocol/image_parts.h).
json image_part(const json& block, const std::string& path) {
  const json* source = field(block, "source");
  if (!source || !source->is_object()) throw Error(quoted(path + ".source") + " must be an object");
  const std::string kind = string_field(*source, "type", path + ".source");
  if (kind == "url") {
    throw Error(quoted(path + ".source") +
                " is a URL: pagoda fetches no images over the network; send the image "
                "as base64 ({\"type\": \"base64\", \"media_type\": ..., \"data\": ...})");
  }
  if (kind != "base64") throw Error(quoted(path + ".source.type") + " must be 'base64', got '" + kind + "'");
  const std::string media = string_field(*source, "media_type", path + ".source");
  return {{"type", "image_url"},
          {"image_url", {{"url", "data:" + media + ";base64," + string_field(*source, "data", path + ".source")}}}};
}

std::string block_type(const json& block, const std::string& path) {
  if (!block.is_object()) throw Error(quoted(path) + " must be a content block object");
  return string_field(block, "type", path);
}

[[noreturn]] void unsupported_block(const std::string& type, const std::string& path) {
  if (type == "document" || type == "search_result" || type == "container_upload") {
    throw Error(quoted(path) + " is a '" + type + "' block: this server reads text and images only");
  }
  throw Error(quoted(path) + " has an unknown block type '" + type + "'");
}

// Calls `visit(type, block, where)` for each of a turn's content blocks, `where` its path.
template <typename Visit>
void for_each_block(const json& content, const std::string& path, Visit visit) {
  for (size_t j = 0; j < content.size(); ++j) {
    const std::string where = path + ".content[" + std::to_string(j) + "]";
    visit(block_type(content[j], where), content[j], where);
  }
}

// A user turn: text blocks become user messages, each tool_result a tool message, in order.
void user_turn(const json& content, const std::string& path, json& messages) {
  if (content.is_string()) {
    messages.push_back({{"role", "user"}, {"content", content}});
    return;
  }
  json parts = json::array();
  auto flush = [&] {
    if (!parts.empty()) messages.push_back({{"role", "user"}, {"content", std::exchange(parts, json::array())}});
  };
  for_each_block(content, path, [&](const std::string& type, const json& block, const std::string& where) {
    if (type == "text") {
      parts.push_back(text_part(block, where));
    } else if (type == "image") {
      parts.push_back(image_part(block, where));
    } else if (type == "tool_result") {
      flush();
      messages.push_back({{"role", "tool"},
                          {"tool_call_id", string_field(block, "tool_use_id", where)},
                          {"content", tool_result_text(block, where)}});
    } else {
      unsupported_block(type, where);
    }
  });
  flush();
}

// An assistant turn: text, thinking and tool_use blocks as one assistant message.
void assistant_turn(const json& content, const std::string& path, json& messages) {
  if (content.is_string()) {
    messages.push_back({{"role", "assistant"}, {"content", content}});
    return;
  }
  json parts = json::array();
  json calls = json::array();
  std::string reasoning;
  for_each_block(content, path, [&](const std::string& type, const json& block, const std::string& where) {
    if (type == "text") {
      parts.push_back(text_part(block, where));
    } else if (type == "thinking") {
      reasoning += string_field(block, "thinking", where);
    } else if (type == "redacted_thinking") {
      return;  // encrypted by another provider: nothing a model here can read
    } else if (type == "tool_use") {
      const json* input = field(block, "input");
      if (input && !input->is_object()) throw Error(quoted(where + ".input") + " must be an object");
      calls.push_back(
          {{"id", string_field(block, "id", where)},
           {"type", "function"},
           {"function",
            {{"name", string_field(block, "name", where)}, {"arguments", input ? input->dump() : std::string("{}")}}}});
    } else {
      unsupported_block(type, where);
    }
  });
  json message = {{"role", "assistant"}, {"content", parts.empty() ? json("") : parts}};
  if (!calls.empty()) message["tool_calls"] = calls;
  if (!reasoning.empty()) message["reasoning_content"] = reasoning;
  messages.push_back(std::move(message));
}

// `system`: a string or text blocks.
json system_message(const json& system) {
  if (system.is_string()) return {{"role", "system"}, {"content", system}};
  if (!system.is_array()) throw Error("'system' must be a string or a list of text blocks");
  json parts = json::array();
  for (size_t k = 0; k < system.size(); ++k) {
    const std::string where = "system[" + std::to_string(k) + "]";
    if (block_type(system[k], where) != "text") throw Error(quoted(where) + " must be a text block");
    parts.push_back(text_part(system[k], where));
  }
  return {{"role", "system"}, {"content", parts}};
}

// `tools`: client tools {name, description, input_schema} as chat functions.
json chat_tools(const json& tools) {
  if (!tools.is_array()) throw Error("'tools' must be a list");
  json out = json::array();
  for (size_t k = 0; k < tools.size(); ++k) {
    const std::string where = "tools[" + std::to_string(k) + "]";
    const json& tool = tools[k];
    if (!tool.is_object()) throw Error(quoted(where) + " must be an object");
    if (const json* type = field(tool, "type"); type && (!type->is_string() || *type != "custom")) {
      throw Error(quoted(where + ".type") + " is '" + type->dump() +
                  "': only client tools (with an input_schema) are supported, not server tools");
    }
    json function = {{"name", string_field(tool, "name", where)}};
    if (const json* d = field(tool, "description")) {
      if (!d->is_string()) throw Error(quoted(where + ".description") + " must be a string");
      function["description"] = *d;
    }
    const json* schema = field(tool, "input_schema");
    if (!schema || !schema->is_object()) throw Error(quoted(where + ".input_schema") + " must be a JSON Schema object");
    function["parameters"] = *schema;
    out.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  return out;
}

// `tool_choice` into the chat body: auto, any (a call is required), tool (that one), none.
void tool_choice(const json& choice, json& out) {
  if (!choice.is_object()) throw Error("'tool_choice' must be an object with a 'type'");
  const std::string type = string_field(choice, "type", "tool_choice");
  if (type == "auto") {
    out["tool_choice"] = "auto";
  } else if (type == "any") {
    out["tool_choice"] = "required";
  } else if (type == "tool") {
    out["tool_choice"] = {{"type", "function"}, {"function", {{"name", string_field(choice, "name", "tool_choice")}}}};
  } else if (type == "none") {
    out["tool_choice"] = "none";
  } else {
    throw Error("'tool_choice.type' must be 'auto', 'any', 'tool' or 'none', got '" + type + "'");
  }
  if (const json* d = field(choice, "disable_parallel_tool_use")) {
    if (!d->is_boolean()) throw Error("'tool_choice.disable_parallel_tool_use' must be a boolean");
    out["parallel_tool_calls"] = !d->get<bool>();
  }
}

std::string random_suffix() {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng(std::random_device{}());
  std::string s;
  for (int i = 0; i < 24; ++i) s += kAlphabet[rng() % (sizeof(kAlphabet) - 1)];
  return s;
}

}  // namespace

nlohmann::ordered_json to_chat_body(const json& body, bool for_count) {
  if (!body.is_object()) throw Error("the body must be a JSON object");
  json out = json::object();
  if (const json* model = field(body, "model")) out["model"] = *model;
  json messages = json::array();
  if (const json* system = field(body, "system")) messages.push_back(system_message(*system));
  const json* turns = field(body, "messages");
  if (!turns || !turns->is_array() || turns->empty()) throw Error("'messages' must be a non-empty list");
  for (size_t i = 0; i < turns->size(); ++i) {
    const std::string where = "messages[" + std::to_string(i) + "]";
    const json& turn = (*turns)[i];
    if (!turn.is_object()) throw Error(quoted(where) + " must be an object with 'role' and 'content'");
    const std::string role = string_field(turn, "role", where);
    const json* content = field(turn, "content");
    if (!content || !(content->is_string() || content->is_array())) {
      throw Error(quoted(where + ".content") + " must be a string or a list of content blocks");
    }
    if (role == "user") {
      user_turn(*content, where, messages);
    } else if (role == "assistant") {
      assistant_turn(*content, where, messages);
    } else {
      throw Error(quoted(where + ".role") + " must be 'user' or 'assistant', got '" + role + "'");
    }
  }
  out["messages"] = std::move(messages);
  if (const json* tools = field(body, "tools")) out["tools"] = chat_tools(*tools);
  if (const json* choice = field(body, "tool_choice")) tool_choice(*choice, out);
  if (const json* servers = field(body, "mcp_servers"); servers && !servers->empty()) {
    throw Error("'mcp_servers' is not supported: this server runs no MCP connector");
  }
  if (const json* thinking = field(body, "thinking")) {
    if (!thinking->is_object()) throw Error("'thinking' must be an object with a 'type'");
    // Templates with a thinking switch (Qwen3's enable_thinking) honour it; others ignore it.
    out["chat_template_kwargs"] = {{"enable_thinking", string_field(*thinking, "type", "thinking") != "disabled"}};
  }
  if (for_count) return out;

  const json* max_tokens = field(body, "max_tokens");
  if (!max_tokens) throw Error("'max_tokens' is required");
  if (!max_tokens->is_number_integer() || (!max_tokens->is_number_unsigned() && max_tokens->get<int64_t>() < 1) ||
      (max_tokens->is_number_unsigned() && max_tokens->get<uint64_t>() < 1)) {
    throw Error("'max_tokens' must be an integer of at least 1, got " + max_tokens->dump());
  }
  // Beyond any context: what is asked is bounded by the context's room anyway.
  out["max_tokens"] = max_tokens->is_number_unsigned() ? std::min<uint64_t>(max_tokens->get<uint64_t>(), INT32_MAX)
                                                       : std::min<int64_t>(max_tokens->get<int64_t>(), INT32_MAX);
  if (const json* stops = field(body, "stop_sequences")) {
    if (!stops->is_array()) throw Error("'stop_sequences' must be a list of strings");
    for (const json& s : *stops) {
      if (!s.is_string()) throw Error("'stop_sequences' must be a list of strings");
    }
    out["stop"] = *stops;
  }
  for (const char* name : {"temperature", "top_p", "top_k", "stream"}) {
    if (const json* v = field(body, name)) out[name] = *v;
  }
  return out;
}

const char* stop_reason(const Reply& reply) {
  if (!reply.calls.empty()) return "tool_use";
  if (reply.finish == FinishReason::Length) return "max_tokens";
  if (!reply.stop_sequence.empty()) return "stop_sequence";
  return "end_turn";
}

std::string tool_use_id(const chat::ParsedToolCall& call) {
  return call.id.empty() ? "toolu_" + random_suffix() : call.id;
}

namespace {

nlohmann::ordered_json usage_json(const Reply& reply) {
  return {{"input_tokens", reply.input_tokens},
          {"output_tokens", reply.output_tokens},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", 0}};
}

nlohmann::ordered_json stop_sequence_json(const Reply& reply) {
  if (reply.stop_sequence.empty() || !reply.calls.empty() || reply.finish == FinishReason::Length) return nullptr;
  return reply.stop_sequence;
}

// A call's arguments as the tool_use block's `input` object (text that does not parse, which a
// grammar-constrained call never is, passes as a string under "arguments").
nlohmann::ordered_json call_input(const chat::ParsedToolCall& call) {
  nlohmann::ordered_json input = parse_ordered_json_bounded(call.arguments, "tool call arguments", false);
  return input.is_object() ? input : nlohmann::ordered_json{{"arguments", call.arguments}};
}

nlohmann::ordered_json tool_use_block(const chat::ParsedToolCall& call, const std::string& id,
                                      nlohmann::ordered_json input) {
  return {{"type", "tool_use"}, {"id", id}, {"name", call.name}, {"input", std::move(input)}};
}

}  // namespace

nlohmann::ordered_json message_json(const std::string& id, const std::string& model, const Reply& reply,
                                    const std::vector<std::string>& ids) {
  nlohmann::ordered_json content = nlohmann::ordered_json::array();
  if (!reply.thinking.empty())
    content.push_back({{"type", "thinking"}, {"thinking", reply.thinking}, {"signature", ""}});
  if (!reply.text.empty()) content.push_back({{"type", "text"}, {"text", reply.text}});
  for (size_t k = 0; k < reply.calls.size(); ++k) {
    content.push_back(tool_use_block(reply.calls[k], ids.at(k), call_input(reply.calls[k])));
  }
  return {{"id", id},
          {"type", "message"},
          {"role", "assistant"},
          {"model", model},
          {"content", std::move(content)},
          {"stop_reason", stop_reason(reply)},
          {"stop_sequence", stop_sequence_json(reply)},
          {"usage", usage_json(reply)}};
}

std::vector<MessageEvents::Event> MessageEvents::start(int64_t input_tokens) {
  Reply empty;
  empty.input_tokens = input_tokens;
  nlohmann::ordered_json message = {{"id", id_},
                                    {"type", "message"},
                                    {"role", "assistant"},
                                    {"model", model_},
                                    {"content", nlohmann::ordered_json::array()},
                                    {"stop_reason", nullptr},
                                    {"stop_sequence", nullptr},
                                    {"usage", usage_json(empty)}};
  return {{"message_start", {{"type", "message_start"}, {"message", std::move(message)}}}};
}

void MessageEvents::open(Block kind, std::vector<Event>& out) {
  if (open_ == kind) return;
  close(out);
  open_ = kind;
  ++index_;
  nlohmann::ordered_json block = kind == Block::Thinking
                                     ? nlohmann::ordered_json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}
                                     : nlohmann::ordered_json{{"type", "text"}, {"text", ""}};
  out.push_back(
      {"content_block_start", {{"type", "content_block_start"}, {"index", index_}, {"content_block", block}}});
}

void MessageEvents::close(std::vector<Event>& out) {
  if (open_ == Block::None) return;
  out.push_back({"content_block_stop", {{"type", "content_block_stop"}, {"index", index_}}});
  open_ = Block::None;
}

std::vector<MessageEvents::Event> MessageEvents::thinking(std::string_view piece) {
  std::vector<Event> out;
  if (piece.empty()) return out;
  open(Block::Thinking, out);
  out.push_back({"content_block_delta",
                 {{"type", "content_block_delta"},
                  {"index", index_},
                  {"delta", {{"type", "thinking_delta"}, {"thinking", piece}}}}});
  return out;
}

std::vector<MessageEvents::Event> MessageEvents::text(std::string_view piece) {
  std::vector<Event> out;
  if (piece.empty()) return out;
  open(Block::Text, out);
  out.push_back(
      {"content_block_delta",
       {{"type", "content_block_delta"}, {"index", index_}, {"delta", {{"type", "text_delta"}, {"text", piece}}}}});
  return out;
}

std::vector<MessageEvents::Event> MessageEvents::finish(const Reply& reply) {
  std::vector<Event> out;
  close(out);
  for (const chat::ParsedToolCall& call : reply.calls) {
    ++index_;
    out.push_back({"content_block_start",
                   {{"type", "content_block_start"},
                    {"index", index_},
                    {"content_block", tool_use_block(call, tool_use_id(call), nlohmann::ordered_json::object())}}});
    out.push_back({"content_block_delta",
                   {{"type", "content_block_delta"},
                    {"index", index_},
                    {"delta", {{"type", "input_json_delta"}, {"partial_json", call_input(call).dump()}}}}});
    out.push_back({"content_block_stop", {{"type", "content_block_stop"}, {"index", index_}}});
  }
  out.push_back({"message_delta",
                 {{"type", "message_delta"},
                  {"delta", {{"stop_reason", stop_reason(reply)}, {"stop_sequence", stop_sequence_json(reply)}}},
                  {"usage", {{"output_tokens", reply.output_tokens}}}}});
  out.push_back({"message_stop", {{"type", "message_stop"}}});
  return out;
}

nlohmann::ordered_json error_json(int status, std::string_view message) {
  const char* type = "api_error";
  switch (status) {
    case 400: type = "invalid_request_error"; break;
    case 401: type = "authentication_error"; break;
    case 403: type = "permission_error"; break;
    case 404: type = "not_found_error"; break;
    case 413: type = "request_too_large"; break;
    case 429: type = "rate_limit_error"; break;
    case 503:
    case 529: type = "overloaded_error"; break;
    default: type = status >= 400 && status < 500 ? "invalid_request_error" : "api_error";
  }
  return {{"type", "error"}, {"error", {{"type", type}, {"message", message}}}};
}

}  // namespace pagoda::anthropic
