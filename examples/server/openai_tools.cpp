#include "examples/server/openai_tools.h"

#include <algorithm>

#include "examples/server/api_error.h"
#include "pagoda/error.h"

namespace pagoda::server {

namespace {

using nlohmann::json;

// Whether `tag` is one control token of the vocabulary (Mistral's [TOOL_CALLS]): the model
// writes it as that token, which a grammar over text cannot produce.
bool is_control_tag(const Engine& engine, const std::string& tag) {
  if (tag.empty()) return false;
  return engine.tokenize(tag, false, true).size() == 1 && engine.tokenize(tag, false, false).size() > 1;
}

}  // namespace

std::optional<ToolRequest> parse_tool_request(const json& body, const Engine& engine) {
  const auto tools_it = body.find("tools");
  const auto choice_it = body.find("tool_choice");
  const bool has_tools = tools_it != body.end() && !tools_it->is_null();
  const bool has_choice = choice_it != body.end() && !choice_it->is_null();
  if (!has_tools) {
    if (has_choice && !(choice_it->is_string() && choice_it->get<std::string>() == "none")) {
      throw bad_request("'tool_choice' needs 'tools'");
    }
    return std::nullopt;
  }
  ToolRequest t;
  try {
    t.tools.definitions = chat::parse_tool_definitions(tools_it->dump());
  } catch (const Error& e) {
    throw bad_request(e.what());
  }
  t.tools_json = tools_it->dump();
  std::string named;
  if (has_choice) {
    const json& c = *choice_it;
    if (c.is_string()) {
      const std::string choice = c.get<std::string>();
      if (choice == "none") return std::nullopt;
      if (choice != "auto" && choice != "required") {
        throw bad_request("'tool_choice' must be 'none', 'auto', 'required' or {\"type\": \"function\", \"function\": {\"name\": ...}}");
      }
      t.required = choice == "required";
    } else if (c.is_object() && c.value("type", "") == "function" && c.contains("function") && c["function"].is_object() &&
               c["function"].contains("name") && c["function"]["name"].is_string()) {
      named = c["function"]["name"].get<std::string>();
      t.required = true;
    } else {
      throw bad_request("'tool_choice' must be 'none', 'auto', 'required' or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
  }
  if (!named.empty()) {
    auto& defs = t.tools.definitions;
    const auto it = std::find_if(defs.begin(), defs.end(), [&](const chat::ToolDefinition& d) { return d.name == named; });
    if (it == defs.end()) throw bad_request("'tool_choice' names the function '" + named + "', which is not in 'tools'");
    defs = {*it};
  }
  if (const auto p = body.find("parallel_tool_calls"); p != body.end() && !p->is_null()) {
    if (!p->is_boolean()) throw bad_request("'parallel_tool_calls' must be a boolean");
    t.parallel = p->get<bool>();
  }
  const std::optional<std::string> chat_template = engine.chat_template();
  t.tools.format = chat_template ? chat::detect_tool_call_format(*chat_template) : chat::ToolCallFormat::Generic;
  return t;
}

void constrain_tool_calls(const ToolRequest& tools, const Engine& engine, Request& r) {
  if (!r.grammar.empty() || !r.json_schema.empty()) {
    throw bad_request("'response_format', 'grammar' and 'json_schema' cannot be combined with 'tools'");
  }
  const std::string tag(chat::tool_call_tag(tools.tools.format));
  try {
    const chat::ToolGrammar g = chat::tool_call_grammar(tools.tools.format, tools.tools.definitions, !tools.required,
                                                        tools.parallel, is_control_tag(engine, tag));
    r.grammar = g.gbnf;
    r.grammar_triggers = g.triggers;
  } catch (const Error& e) {
    throw bad_request(std::string("'tools': ") + e.what());
  }
}

}  // namespace pagoda::server
