// Every chat template in ../shared/templates (as model vendors ship them) and in
// tests/data/templates (written for pagoda, with features the vendors' templates use) rendered
// by pagoda and by Python's jinja2 for a set of conversations: the outputs must be byte-identical,
// and where jinja2 raises, pagoda must raise too. The conversations with tools are also rendered
// from a request body's text, read as pagoda-server and the Python package read it, so the order
// of the tools' and arguments' keys on the wire is the order the template prints.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/chat/chat_renderer.h"
#include "engine/util/json_depth.h"
#include "pagoda/error.h"
#include "protocol/openai_chat.h"
#include "support/jinja_oracle.h"
#include "support/test_support.h"

namespace pagoda::test {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

json weather_tool() {
  return json::parse(R"({"type": "function", "function": {
    "name": "get_weather",
    "description": "Get the weather — it's \"live\" & <fast>",
    "parameters": {"type": "object",
      "properties": {
        "location": {"type": "string", "description": "The city, e.g. Zürich"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 7.5}},
      "required": ["location"]}}})");
}

json search_tool() {
  return json::parse(R"({"type": "function", "function": {
    "name": "web_search", "description": "Search the web",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}})");
}

json message(const char* role, const std::string& content) { return json{{"role", role}, {"content", content}}; }

json tool_call_turn() {
  return json::parse(R"({"role": "assistant", "content": "", "tool_calls": [
    {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"location": "Paris", "days": 2}}}]})");
}

json tool_result_turn() {
  return json::parse(
      R"({"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"temperature\": 21.5, \"sky\": \"clear\"}"})");
}

// The conversations every template is rendered with, each with and without the generation prompt.
std::vector<std::pair<std::string, json>> conversations() {
  const json system = message("system", "You are a helpful assistant.");
  const json user = message("user", "Hello! What's 2 + 2?");
  const json assistant = message("assistant", "It is 4.\nAnything else?");
  const json user2 = message("user", "  Thanks — and the weather in Paris?  ");
  std::vector<std::pair<std::string, json>> base = {
      {"system", json{{"messages", {system, user}}}},
      {"no system", json{{"messages", {user}}}},
      {"multi-turn", json{{"messages", {system, user, assistant, user2}}}},
      {"tools", json{{"messages", {user2}}, {"tools", {weather_tool(), search_tool()}}}},
      {"tool calls",
       json{{"messages",
             {system, user2, tool_call_turn(), tool_result_turn(), message("assistant", "It is 21.5 °C and clear.")}},
            {"tools", {weather_tool()}}}},
      {"tool result last",
       json{{"messages", {user2, tool_call_turn(), tool_result_turn()}}, {"tools", {weather_tool()}}}},
      {"extra kwargs", json{{"messages", {system, user}}, {"enable_thinking", false}, {"date_string", "01 Jan 2025"}}},
  };
  std::vector<std::pair<std::string, json>> all;
  for (const auto& [name, context] : base) {
    for (bool add : {true, false}) {
      json c = context;
      c["add_generation_prompt"] = add;
      c["bos_token"] = "<s>";
      c["eos_token"] = "</s>";
      all.emplace_back(name + (add ? ", generation prompt" : ""), c);
    }
  }
  return all;
}

std::vector<fs::path> templates_in(const fs::path& dir) {
  std::vector<fs::path> files;
  if (!fs::is_directory(dir)) return files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".jinja") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// `context`'s messages and tools sent as a chat request body's text, read back by protocol/
// (as pagoda-server and the Python package read one) and rendered through the engine's context.
OracleResult render_from_request(const std::string& source, const json& context) {
  try {
    const std::string text = json{{"messages", context["messages"]}, {"tools", context["tools"]}}.dump();
    const json body = parse_ordered_json_bounded(text, "the body");
    const std::vector<ChatMessage> messages = chat::parse_messages(body["messages"]);
    const std::optional<chat::ToolRequest> tools = chat::parse_tool_request(body, source);
    ChatTemplateOptions options;
    options.add_generation_prompt = context["add_generation_prompt"].get<bool>();
    options.tools = tools->tools_json;
    const json rendered = chat::template_context(messages, options, context["bos_token"], context["eos_token"], false);
    return {true, jinja::Template(source).render(rendered)};
  } catch (const Error& e) {
    return {false, e.what()};
  }
}

using Renderer = std::function<OracleResult(const std::string& source, const json& context)>;

// Renders every template of `dir` for every conversation (those with tools only, with
// `tools_only`) with pagoda's `render` and with the oracle.
void expect_identical(const fs::path& dir, const Renderer& render = render_with_pagoda, bool tools_only = false) {
  const std::vector<fs::path> files = templates_in(dir);
  ASSERT_FALSE(files.empty()) << "no templates in " << dir;
  auto convs = conversations();
  if (tools_only) std::erase_if(convs, [](const auto& c) { return !c.second.contains("tools"); });
  json cases = json::array();
  for (const auto& file : files) {
    const std::string source = read_text(file);
    for (const auto& [name, context] : convs) cases.push_back(json{{"template", source}, {"context", context}});
  }
  const std::vector<OracleResult> expected = run_jinja_oracle(cases);
  ASSERT_EQ(expected.size(), cases.size());
  size_t i = 0, rendered = 0, raised = 0;
  for (const auto& file : files) {
    for (const auto& [name, context] : convs) {
      SCOPED_TRACE(file.filename().string() + " / " + name);
      const OracleResult got = render(cases[i]["template"].get<std::string>(), context);
      const OracleResult& want = expected[i++];
      if (want.ok) {
        ++rendered;
        EXPECT_TRUE(got.ok) << "pagoda raised where jinja2 rendered: " << got.output;
        if (got.ok) {
          EXPECT_EQ(got.output, want.output);
        }
      } else {
        ++raised;
        EXPECT_FALSE(got.ok) << "jinja2 raised (" << want.output << ") but pagoda rendered:\n" << got.output;
      }
    }
  }
  std::cout << files.size() << " templates x " << convs.size() << " conversations: " << rendered
            << " rendered identically checked, " << raised << " raising in jinja2\n";
}

TEST(JinjaTemplates, VendorTemplatesRenderAsJinja2Does) {
  if (const std::string why = jinja_oracle_missing(); !why.empty()) GTEST_SKIP() << why << "; skipping";
  PAGODA_SHARED_OR_SKIP(readme, "templates/README.md");
  expect_identical(fs::path(readme).parent_path());
}

TEST(JinjaTemplates, VendorTemplatesRenderToolsFromARequestBodyInItsKeyOrder) {
  if (const std::string why = jinja_oracle_missing(); !why.empty()) GTEST_SKIP() << why << "; skipping";
  PAGODA_SHARED_OR_SKIP(readme, "templates/README.md");
  expect_identical(fs::path(readme).parent_path(), render_from_request, true);
}

TEST(JinjaTemplates, OwnTemplatesRenderAsJinja2Does) {
  if (const std::string why = jinja_oracle_missing(); !why.empty()) GTEST_SKIP() << why << "; skipping";
  expect_identical(fs::path(PAGODA_SOURCE_DIR) / "tests" / "data" / "templates");
}

}  // namespace
}  // namespace pagoda::test
