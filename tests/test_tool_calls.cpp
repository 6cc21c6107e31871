// Tool calls (protocol/tool_calls): the layout each vendor template uses, the parser on
// replies written the way models write them, and grammar round trips — every text a tool-call
// grammar admits parses back into calls of the given tools whose arguments are JSON objects.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol/tool_calls.h"
#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/grammar_matcher.h"
#include "pagoda/error.h"
#include "support/test_support.h"

namespace pagoda::chat {
namespace {

const char* const kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
   "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                  "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
   "properties": {"a": {"type": "integer", "minimum": -50, "maximum": 50}, "b": {"type": "integer"}},
   "required": ["a", "b"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "now"}}
])";

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ToolCalls, VendorTemplatesAreRecognised) {
  const std::filesystem::path dir = std::filesystem::path(PAGODA_SHARED_DIR) / "templates";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << dir << " is absent";
  const std::vector<std::pair<std::string, ToolCallFormat>> expected = {
      {"Qwen-Qwen2.5-7B-Instruct.jinja", ToolCallFormat::Hermes},
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", ToolCallFormat::Hermes},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", ToolCallFormat::Llama3},
      {"meta-llama-Llama-3.2-3B-Instruct.jinja", ToolCallFormat::Llama3},
      {"google-gemma-2-2b-it.jinja", ToolCallFormat::Generic},
  };
  for (const auto& [file, format] : expected) {
    if (!std::filesystem::exists(dir / file)) continue;
    EXPECT_EQ(detect_tool_call_format(read_file(dir / file)), format) << file;
  }
}

TEST(ToolCalls, DefinitionsAreChecked) {
  const std::vector<ToolDefinition> tools = parse_tool_definitions(kTools);
  ASSERT_EQ(tools.size(), 3u);
  EXPECT_EQ(tools[0].name, "get_weather");
  EXPECT_EQ(nlohmann::json::parse(tools[2].parameters), nlohmann::json::parse(R"({"type": "object"})"));
  for (const char* bad :
       {"{}", "[]", R"([{"type": "function"}])", R"([{"type": "function", "function": {"name": "a b"}}])",
        R"([{"type": "function", "function": {"name": "f", "parameters": 3}}])",
        R"([{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}])"}) {
    EXPECT_THROW(parse_tool_definitions(bad), Error) << bad;
  }
}

TEST(ToolCalls, RepliesParseAsModelsWriteThem) {
  const std::vector<ToolDefinition> tools = parse_tool_definitions(kTools);
  {
    const ParsedReply r = parse_tool_calls(
        ToolCallFormat::Hermes,
        "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
        "</tool_call>\n<tool_call>\n{\"arguments\": {\"b\": 2, \"a\": 1}, \"name\": \"add\"}\n</tool_call>",
        tools);
    EXPECT_EQ(r.content, "Let me check.");
    ASSERT_EQ(r.calls.size(), 2u);
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(r.calls[0].arguments, R"({"city":"Paris"})");
    EXPECT_EQ(r.calls[1].arguments, R"({"b":2,"a":1})") << "the model's key order is kept";
  }
  {  // an unknown tool or broken JSON stays content
    const ParsedReply r = parse_tool_calls(ToolCallFormat::Hermes,
                                           "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>", tools);
    EXPECT_TRUE(r.calls.empty());
    EXPECT_NE(r.content.find("nope"), std::string::npos);
  }
  {
    const ParsedReply r = parse_tool_calls(
        ToolCallFormat::Llama3, "<|python_tag|>{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}", tools);
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].arguments, R"({"a":1,"b":2})");
    EXPECT_TRUE(r.content.empty());
  }
  {  // arguments given as a JSON string are read as the object they spell
    const ParsedReply r = parse_tool_calls(
        ToolCallFormat::Mistral,
        "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": \"{\\\"a\\\": 3, \\\"b\\\": 4}\", \"id\": \"abcdefghi\"}]",
        tools);
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].id, "abcdefghi");
    EXPECT_EQ(r.calls[0].arguments, R"({"a":3,"b":4})");
  }
  {
    const ParsedReply r = parse_tool_calls(ToolCallFormat::Llama3, "The answer is 3.", tools);
    EXPECT_TRUE(r.calls.empty());
    EXPECT_EQ(r.content, "The answer is 3.");
  }
  {
    const ParsedReply r =
        parse_tool_calls(ToolCallFormat::Generic, R"({"tool_calls": [{"name": "now", "arguments": {}}]})", tools);
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].name, "now");
  }
}

// A random text of `gbnf`: at each step a random character the grammar accepts, from an
// alphabet that covers what tool-call grammars write, ending as soon as it may once `steps`
// characters are out. Empty if it did not end within the limit.
std::string random_sentence(const std::string& gbnf, std::mt19937& rng, size_t steps) {
  grammar::GrammarMatcher m(std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(gbnf)));
  const std::u32string alphabet = U" \n\"{}[]:,-.0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_<>/|é";
  std::string text;
  for (size_t i = 0; i < 4000; ++i) {
    if (m.can_end() && (i >= steps || rng() % 8 == 0)) return text;
    std::vector<char32_t> options;
    for (char32_t c : alphabet) {
      grammar::GrammarMatcher probe = m;
      if (probe.accept(c)) options.push_back(c);
    }
    if (options.empty()) return m.can_end() ? text : std::string();
    // Past `steps`, prefer what closes: quotes and brackets.
    char32_t c = options[rng() % options.size()];
    if (i >= steps) {
      for (char32_t closing : {U'"', U'}', U']', U'>'}) {
        if (std::find(options.begin(), options.end(), closing) != options.end()) c = closing;
      }
    }
    EXPECT_TRUE(m.accept(c));
    if (c < 0x80) {
      text += char(c);
    } else {
      text += "\xc3\xa9";  // é, the only non-ASCII letter offered
    }
  }
  return {};
}

TEST(ToolCalls, EveryTextAGrammarAdmitsParsesIntoCalls) {
  const std::vector<ToolDefinition> tools = parse_tool_definitions(kTools);
  std::mt19937 rng(7);
  for (ToolCallFormat format :
       {ToolCallFormat::Hermes, ToolCallFormat::Llama3, ToolCallFormat::Mistral, ToolCallFormat::Generic}) {
    for (bool parallel : {false, true}) {
      for (bool lazy : {false, true}) {
        const ToolGrammar g = tool_call_grammar(format, tools, lazy, parallel, false);
        EXPECT_EQ(g.triggers.empty(), !lazy);
        int parsed = 0;
        for (int walk = 0; walk < 30; ++walk) {
          const std::string text = random_sentence(g.gbnf, rng, 40);
          if (text.empty()) continue;
          for (const std::string& t : g.triggers)
            EXPECT_EQ(text.rfind(t, 0), 0u) << "a lazy grammar starts with its trigger";
          const ParsedReply r = parse_tool_calls(format, text, tools);
          ASSERT_FALSE(r.calls.empty()) << tool_call_format_name(format) << ": " << text;
          EXPECT_TRUE(r.content.empty()) << text;
          if (!parallel) {
            EXPECT_EQ(r.calls.size(), 1u);
          }
          for (const ParsedToolCall& c : r.calls) {
            const nlohmann::json args = nlohmann::json::parse(c.arguments);
            ASSERT_TRUE(args.is_object());
            if (c.name == "add") {
              ASSERT_TRUE(args.contains("a") && args.contains("b")) << c.arguments;
              EXPECT_GE(args["a"].get<int64_t>(), -50);
              EXPECT_LE(args["a"].get<int64_t>(), 50);
              EXPECT_EQ(args.size(), 2u);
            } else if (c.name == "get_weather") {
              ASSERT_TRUE(args.contains("city")) << c.arguments;
              EXPECT_LE(args["city"].get<std::string>().size(), 24u);
            }
          }
          ++parsed;
        }
        EXPECT_GE(parsed, 10) << tool_call_format_name(format) << ": too few walks ended";
      }
    }
  }
}

TEST(ToolCalls, BesideAnAnswerSchemaEveryTextIsCallsOrTheAnswer) {
  const std::vector<ToolDefinition> tools = parse_tool_definitions(kTools);
  const std::string schema =
      R"({"type": "object", "properties": {"verdict": {"enum": ["yes", "no"]}, "score": {"type": "integer",
          "minimum": 0, "maximum": 9}}, "required": ["verdict", "score"], "additionalProperties": false})";
  std::mt19937 rng(11);
  for (ToolCallFormat format :
       {ToolCallFormat::Hermes, ToolCallFormat::Llama3, ToolCallFormat::Mistral, ToolCallFormat::Generic}) {
    const ToolGrammar g = tool_or_answer_grammar(format, tools, schema, true, false);
    EXPECT_TRUE(g.triggers.empty()) << "the whole reply is constrained";
    int calls = 0, answers = 0;
    for (int walk = 0; walk < 60; ++walk) {
      const std::string text = random_sentence(g.gbnf, rng, 40);
      if (text.empty()) continue;
      const ParsedReply r = parse_tool_calls(format, text, tools);
      if (!r.calls.empty()) {
        EXPECT_TRUE(r.content.empty()) << text;
        ++calls;
        continue;
      }
      const nlohmann::json answer = nlohmann::json::parse(r.content);
      ASSERT_TRUE(answer.is_object()) << text;
      EXPECT_EQ(answer.size(), 2u) << text;
      EXPECT_TRUE(answer["verdict"] == "yes" || answer["verdict"] == "no") << text;
      ++answers;
    }
    EXPECT_GE(calls, 5) << tool_call_format_name(format);
    EXPECT_GE(answers, 5) << tool_call_format_name(format);
  }
  EXPECT_THROW(tool_or_answer_grammar(ToolCallFormat::Hermes, tools, R"({"type": "frog"})", true, false), Error);
}

TEST(ToolCalls, AControlTagIsLeftOutOfAWholeReplyGrammar) {
  const std::vector<ToolDefinition> tools = parse_tool_definitions(kTools);
  const ToolGrammar whole = tool_call_grammar(ToolCallFormat::Mistral, tools, false, false, true);
  EXPECT_EQ(whole.gbnf.find("TOOL_CALLS"), std::string::npos) << whole.gbnf;
  const ToolGrammar lazy = tool_call_grammar(ToolCallFormat::Mistral, tools, true, false, true);
  ASSERT_EQ(lazy.triggers, std::vector<std::string>{"[TOOL_CALLS]"});
  EXPECT_NE(lazy.gbnf.find("TOOL_CALLS"), std::string::npos);
}

TEST(ToolCalls, BadParametersNameTheTool) {
  const std::vector<ToolDefinition> tools = parse_tool_definitions(
      R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "not": {}}}}])");
  try {
    tool_call_grammar(ToolCallFormat::Hermes, tools, false, false, false);
    FAIL() << "an unsupported schema compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'f'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pagoda::chat
