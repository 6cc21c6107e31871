#include "protocol/tool_calls.h"

#include <algorithm>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/grammar/json_schema.h"
#include "engine/util/json_depth.h"
#include "pagoda/error.h"

namespace pagoda::chat {

namespace {

using ordered_json = nlohmann::ordered_json;

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kMistralTag = "[TOOL_CALLS]";
constexpr std::string_view kPythonTag = "<|python_tag|>";

bool contains(std::string_view text, std::string_view what) { return text.find(what) != std::string_view::npos; }

std::string_view trim(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

// OpenAI's function names: letters, digits, '_' and '-', 1 to 64 of them; so a name is safe
// inside a GBNF literal and a JSON string as it is.
bool valid_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

// A GBNF string literal of `text` (which holds no '"' or '\\' but may hold newlines).
std::string literal(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Where the JSON value starting at `begin` (an object or array) ends: one past its closing
// bracket, or npos when the text ends first.
size_t json_value_end(std::string_view text, size_t begin) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = begin; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

// A reply's JSON, or nullopt when it is not JSON or nested deeper than kMaxJsonDepth (the
// arguments are copied and dumped, recursively): either way the text stays content.
std::optional<ordered_json> parse_json(std::string_view text) {
  try {
    ordered_json j = parse_ordered_json_bounded(text, "a tool call", false);
    if (j.is_discarded()) return std::nullopt;
    return j;
  } catch (const Error&) {
    return std::nullopt;
  }
}

// {"name": ..., "arguments" | "parameters": {...} or its JSON text} naming a known tool.
std::optional<ParsedToolCall> call_of(const ordered_json& j, const std::vector<ToolDefinition>& tools) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  const std::string name = j["name"].get<std::string>();
  if (std::none_of(tools.begin(), tools.end(), [&](const ToolDefinition& t) { return t.name == name; }))
    return std::nullopt;
  ordered_json args = ordered_json::object();
  for (const char* key : {"arguments", "parameters"}) {
    if (!j.contains(key)) continue;
    args = j[key];
    if (args.is_string()) {
      std::optional<ordered_json> inner = parse_json(args.get<std::string>());
      if (!inner) return std::nullopt;
      args = *inner;
    }
    break;
  }
  if (!args.is_object()) return std::nullopt;
  ParsedToolCall call{.id = {}, .name = name, .arguments = args.dump()};
  if (j.contains("id") && j["id"].is_string()) call.id = j["id"].get<std::string>();
  return call;
}

// The calls of a JSON array of call objects; nullopt if any entry is not one.
std::optional<std::vector<ParsedToolCall>> calls_of(const ordered_json& j, const std::vector<ToolDefinition>& tools) {
  if (!j.is_array() || j.empty()) return std::nullopt;
  std::vector<ParsedToolCall> calls;
  for (const ordered_json& entry : j) {
    std::optional<ParsedToolCall> c = call_of(entry, tools);
    if (!c) return std::nullopt;
    calls.push_back(std::move(*c));
  }
  return calls;
}

void join_content(std::string& content, std::string_view piece) {
  piece = trim(piece);
  if (piece.empty()) return;
  if (!content.empty()) content += '\n';
  content += piece;
}

ParsedReply parse_hermes(std::string_view reply, const std::vector<ToolDefinition>& tools) {
  ParsedReply out;
  size_t at = 0;
  while (at < reply.size()) {
    const size_t open = reply.find(kHermesOpen, at);
    if (open == std::string_view::npos) break;
    const size_t body = open + kHermesOpen.size();
    const size_t close = reply.find(kHermesClose, body);
    const size_t body_end = close == std::string_view::npos ? reply.size() : close;
    const size_t next = close == std::string_view::npos ? reply.size() : close + kHermesClose.size();
    std::optional<ordered_json> j = parse_json(trim(reply.substr(body, body_end - body)));
    std::optional<ParsedToolCall> call = j ? call_of(*j, tools) : std::nullopt;
    if (call) {
      join_content(out.content, reply.substr(at, open - at));
      out.calls.push_back(std::move(*call));
    } else {
      join_content(out.content, reply.substr(at, next - at));
    }
    at = next;
  }
  join_content(out.content, reply.substr(std::min(at, reply.size())));
  return out;
}

ParsedReply parse_llama3(std::string_view reply, const std::vector<ToolDefinition>& tools) {
  std::string_view text = trim(reply);
  if (text.substr(0, kPythonTag.size()) == kPythonTag) text = trim(text.substr(kPythonTag.size()));
  if (!text.empty() && text.front() == '{') {
    if (std::optional<ordered_json> j = parse_json(text)) {
      if (std::optional<ParsedToolCall> call = call_of(*j, tools)) return {.content = {}, .calls = {std::move(*call)}};
    }
  }
  return {.content = std::string(trim(reply)), .calls = {}};
}

ParsedReply parse_mistral(std::string_view reply, const std::vector<ToolDefinition>& tools) {
  const size_t tag = reply.find(kMistralTag);
  const size_t json_at = tag == std::string_view::npos ? 0 : tag + kMistralTag.size();
  const std::string_view rest = trim(reply.substr(json_at));
  if (!rest.empty() && rest.front() == '[') {
    const size_t end = json_value_end(rest, 0);
    if (end != std::string_view::npos) {
      if (std::optional<ordered_json> j = parse_json(rest.substr(0, end))) {
        if (std::optional<std::vector<ParsedToolCall>> calls = calls_of(*j, tools)) {
          ParsedReply out;
          if (tag != std::string_view::npos) join_content(out.content, reply.substr(0, tag));
          join_content(out.content, rest.substr(end));
          out.calls = std::move(*calls);
          return out;
        }
      }
    }
  }
  return {.content = std::string(trim(reply)), .calls = {}};
}

ParsedReply parse_generic(std::string_view reply, const std::vector<ToolDefinition>& tools) {
  const std::string_view text = trim(reply);
  if (!text.empty() && text.front() == '{') {
    if (std::optional<ordered_json> j = parse_json(text)) {
      if (j->is_object() && j->contains("tool_calls")) {
        if (std::optional<std::vector<ParsedToolCall>> calls = calls_of((*j)["tool_calls"], tools)) {
          return {.content = {}, .calls = std::move(*calls)};
        }
      }
    }
  }
  return {.content = std::string(text), .calls = {}};
}

}  // namespace

const char* tool_call_format_name(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::Hermes: return "hermes";
    case ToolCallFormat::Llama3: return "llama3";
    case ToolCallFormat::Mistral: return "mistral";
    case ToolCallFormat::Generic: return "generic";
  }
  return "generic";
}

ToolCallFormat detect_tool_call_format(std::string_view t) {
  if (contains(t, kHermesOpen)) return ToolCallFormat::Hermes;
  if (contains(t, kMistralTag)) return ToolCallFormat::Mistral;
  if (contains(t, "<|start_header_id|>") && (contains(t, kPythonTag) || contains(t, "\"parameters\": "))) {
    return ToolCallFormat::Llama3;
  }
  return ToolCallFormat::Generic;
}

std::string_view tool_call_tag(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::Hermes: return kHermesOpen;
    case ToolCallFormat::Mistral: return kMistralTag;
    case ToolCallFormat::Llama3: return kPythonTag;
    case ToolCallFormat::Generic: return {};
  }
  return {};
}

std::vector<ToolDefinition> parse_tool_definitions(std::string_view tools_json) {
  const ordered_json tools = parse_ordered_json_bounded(tools_json, "'tools'", false);
  if (tools.is_discarded() || !tools.is_array()) throw Error("'tools' must be a list of tools");
  std::vector<ToolDefinition> out;
  std::set<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string where = "'tools[" + std::to_string(i) + "]'";
    const ordered_json& t = tools[i];
    if (!t.is_object() || t.value("type", "") != "function" || !t.contains("function") || !t["function"].is_object()) {
      throw Error(where + " must be {\"type\": \"function\", \"function\": {...}}");
    }
    const ordered_json& f = t["function"];
    if (!f.contains("name") || !f["name"].is_string() || !valid_name(f["name"].get<std::string>())) {
      throw Error(where + ".function.name must be 1 to 64 letters, digits, '_' or '-'");
    }
    ToolDefinition d{.name = f["name"].get<std::string>(), .parameters = R"({"type":"object"})"};
    if (f.contains("parameters") && !f["parameters"].is_null()) {
      if (!f["parameters"].is_object()) throw Error(where + ".function.parameters must be a JSON Schema object");
      d.parameters = f["parameters"].dump();
    }
    if (!names.insert(d.name).second) throw Error(where + " repeats the tool name '" + d.name + "'");
    out.push_back(std::move(d));
  }
  if (out.empty()) throw Error("'tools' is empty");
  return out;
}

ToolGrammar tool_call_grammar(ToolCallFormat format, const std::vector<ToolDefinition>& tools, bool lazy, bool parallel,
                              bool control_tag) {
  if (tools.empty()) throw Error("a tool-call grammar needs at least one tool");
  const std::string args_key = format == ToolCallFormat::Llama3 ? "parameters" : "arguments";
  std::string rules;
  std::string calls;  // call ::= alternative per tool
  for (size_t i = 0; i < tools.size(); ++i) {
    grammar::JsonSchemaRules args;
    try {
      args = grammar::json_schema_rules(tools[i].parameters, "args-" + std::to_string(i));
    } catch (const Error& e) {
      throw Error("tool '" + tools[i].name + "' parameters: " + e.what());
    }
    rules += args.rules;
    calls += (i == 0 ? "call ::= " : " |\n  ");
    calls += literal("{\"name\": \"" + tools[i].name + "\", \"" + args_key + "\": ") + " " + args.root + " \"}\"";
  }
  rules += calls + "\n";

  ToolGrammar g;
  const std::string tag(tool_call_tag(format));
  switch (format) {
    case ToolCallFormat::Hermes:
      rules += "block ::= " + literal(tag + "\n") + " call " + literal("\n" + std::string(kHermesClose)) + "\n";
      rules += parallel ? "root ::= block (\"\\n\" block)*\n" : "root ::= block\n";
      if (lazy) g.triggers = {tag};
      break;
    case ToolCallFormat::Mistral: {
      const std::string list = parallel ? "\"[\" call (\", \" call)* \"]\"" : "\"[\" call \"]\"";
      // A lazy grammar starts at its trigger, the tag; a whole reply cannot write a control tag.
      rules += "root ::= " + std::string(lazy || !control_tag ? literal(tag) + " " : "") + list + "\n";
      if (lazy) g.triggers = {tag};
      break;
    }
    case ToolCallFormat::Llama3:
      // One call, as Llama 3.1–3.3 write them; a lazy grammar starts at its opening brace.
      rules += "root ::= call\n";
      if (lazy) g.triggers = {"{\"name\": "};
      break;
    case ToolCallFormat::Generic: {
      const std::string list = parallel ? "call (\", \" call)*" : "call";
      rules += "root ::= \"{\\\"tool_calls\\\": [\" " + list + " \"]}\"\n";
      if (lazy) g.triggers = {"{\"tool_calls\""};
      break;
    }
  }
  g.gbnf = std::move(rules);
  return g;
}

ToolGrammar tool_or_answer_grammar(ToolCallFormat format, const std::vector<ToolDefinition>& tools,
                                   std::string_view answer_schema, bool parallel, bool control_tag) {
  std::string calls = tool_call_grammar(format, tools, false, parallel, control_tag).gbnf;
  // Its one `root` becomes an alternative; the answer's rules are all `answer` or `answer-...`,
  // names the call grammar does not use (`call`, `block`, `args-N...`).
  const size_t root = calls.rfind("root ::= ", 0) == 0 ? 0 : calls.find("\nroot ::= ") + 1;
  calls.replace(root, 4, "calls");
  grammar::JsonSchemaRules answer;
  try {
    answer = grammar::json_schema_rules(answer_schema, "answer");
  } catch (const Error& e) {
    throw Error(std::string("the response format's schema: ") + e.what());
  }
  return {.gbnf = "root ::= " + answer.root + " | calls\n" + calls + answer.rules, .triggers = {}};
}

std::string generic_tool_prompt(std::string_view tools_json) {
  return "You can call the following tools:\n" + std::string(tools_json) +
         "\n\nTo call tools, reply with only a JSON object of the form "
         "{\"tool_calls\": [{\"name\": <tool name>, \"arguments\": <arguments object>}]}; otherwise reply normally.";
}

ParsedReply parse_tool_calls(ToolCallFormat format, std::string_view reply, const std::vector<ToolDefinition>& tools) {
  switch (format) {
    case ToolCallFormat::Hermes: return parse_hermes(reply, tools);
    case ToolCallFormat::Llama3: return parse_llama3(reply, tools);
    case ToolCallFormat::Mistral: return parse_mistral(reply, tools);
    case ToolCallFormat::Generic: return parse_generic(reply, tools);
  }
  return {.content = std::string(trim(reply)), .calls = {}};
}

}  // namespace pagoda::chat
