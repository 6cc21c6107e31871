// Deeply nested input from a user (JSON Schemas, GBNF grammars, tools, chat messages, template
// kwargs, a model's tool-call reply) is refused with a pagoda::Error naming the limit, never a
// stack overflow: on the test's own stack and on a thread with a 256 KB stack (what a server
// worker might have), through the engine's internals and through Engine::submit. Input just
// under each limit still works, on the small stack too.

#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol/openai_chat.h"
#include "protocol/tool_calls.h"
#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/json_schema_regex.h"
#include "engine/grammar/shortest_completion.h"
#include "engine/grammar/stack_set.h"
#include "engine/util/json_depth.h"
#include "engine/util/stack_room.h"
#include "pagoda/engine.h"
#include "pagoda/error.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

constexpr size_t kDeep = 100000;
constexpr size_t kSmallStack = 256 * 1024;

// `open` n times, then `inner`, then `close` n times.
std::string nested(const std::string& open, const std::string& inner, const std::string& close, size_t n) {
  std::string out;
  out.reserve(n * (open.size() + close.size()) + inner.size());
  for (size_t i = 0; i < n; ++i) out += open;
  out += inner;
  for (size_t i = 0; i < n; ++i) out += close;
  return out;
}

// What `fn` threw: a pagoda::Error's message, "" when it returned, or a note for anything else.
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not a pagoda::Error: ") + e.what();
  }
  return "";
}

// error_of(fn) on a thread whose whole stack is `bytes` long: mapped here, with a guard page
// below it, since pthread_attr_setstacksize may hand a thread a larger cached stack.
std::string error_on_small_stack(const std::function<void()>& fn, size_t bytes = kSmallStack) {
  struct Call {
    const std::function<void()>* fn;
    std::string error;
  } call{&fn, {}};
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  void* mapped = mmap(nullptr, bytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (mapped == MAP_FAILED) return "mmap failed";
  mprotect(mapped, page, PROT_NONE);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  EXPECT_EQ(pthread_attr_setstack(&attr, static_cast<char*>(mapped) + page, bytes), 0);
  pthread_t thread;
  const int created = pthread_create(
      &thread, &attr,
      [](void* p) -> void* {
        auto* c = static_cast<Call*>(p);
        c->error = error_of(*c->fn);
        return nullptr;
      },
      &call);
  pthread_attr_destroy(&attr);
  EXPECT_EQ(created, 0);
  if (created == 0) pthread_join(thread, nullptr);
  munmap(mapped, bytes + page);
  return call.error;
}

// Expects `fn` to throw a pagoda::Error containing `message`, on this stack and on a small one.
void expect_refused(const std::function<void()>& fn, const std::string& message, const std::string& what,
                    size_t stack_bytes = kSmallStack) {
  const std::string here = error_of(fn);
  EXPECT_NE(here.find(message), std::string::npos) << what << ": " << (here.empty() ? "no error" : here);
  const std::string small = error_on_small_stack(fn, stack_bytes);
  EXPECT_NE(small.find(message), std::string::npos)
      << what << " (" << (stack_bytes >> 10) << " KB stack): " << (small.empty() ? "no error" : small);
}

void expect_works(const std::function<void()>& fn, const std::string& what, size_t stack_bytes = kSmallStack) {
  EXPECT_EQ(error_of(fn), "") << what;
  EXPECT_EQ(error_on_small_stack(fn, stack_bytes), "") << what << " (" << (stack_bytes >> 10) << " KB stack)";
}

// The JSON Schema compiler recurses once per subschema level: kSchemaMaxDepth levels take
// 155 KB of stack in Release, but 1.3 MB under AddressSanitizer, which gives every local and
// temporary of its large recursive functions a slot of its own (on a 256 KB stack it then
// refuses them for want of stack: see InputWithinTheLimitsIsRefusedOnAStackTooSmallForIt).
#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kSchemaStack = 2048 * 1024;
#else
constexpr size_t kSchemaStack = kSmallStack;
#endif

const std::string kJsonLimit = "JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels";

// --- engine/util/json_depth ---

TEST(DeepInput, BoundedParsingAcceptsTheLimitAndRefusesOneLevelMore) {
  const std::string at_limit = nested("[", "1", "]", kMaxJsonDepth);
  EXPECT_EQ(parse_json_bounded(at_limit, "x").dump(), at_limit);
  EXPECT_EQ(parse_ordered_json_bounded(nested("{\"a\":", "{}", "}", kMaxJsonDepth - 1), "x").dump(),
            nested("{\"a\":", "{}", "}", kMaxJsonDepth - 1));
  expect_refused([] { parse_json_bounded(nested("[", "", "]", kMaxJsonDepth + 1), "the body"); },
                 "the body: " + kJsonLimit, "one level too deep");
  expect_refused([] { parse_ordered_json_bounded(nested("{\"a\":", "0", "}", kDeep), "x"); }, kJsonLimit,
                 "100,000 objects");
  // A syntax error is still nlohmann's, or a discarded value.
  EXPECT_THROW(parse_json_bounded("[1,", "x"), nlohmann::json::parse_error);
  EXPECT_TRUE(parse_json_bounded("[1,", "x", false).is_discarded());
  EXPECT_EQ(parse_json_bounded("7", "x", true, 0), 7);
}

TEST(DeepInput, CheckingAParsedValueWalksItWithoutRecursion) {
  const nlohmann::json deep = nlohmann::json::parse(nested("[", "", "]", kDeep));  // nlohmann's parser is iterative
  expect_refused([&] { check_json_depth(deep, "'x'"); }, "'x': " + kJsonLimit, "a parsed 100,000-deep array");
  expect_works([] { check_json_depth(nlohmann::json::parse(nested("[", "", "]", kMaxJsonDepth)), "x"); },
               "at the limit");
  const nlohmann::ordered_json wide = nlohmann::ordered_json::parse("[" + nested("", "[]", ",[]", 10000) + "]");
  expect_works([&] { check_json_depth(wide, "x"); }, "10,001 siblings");
}

// --- JSON Schema (engine/grammar/json_schema) ---

TEST(DeepInput, JsonSchemasNested100000DeepAreRefusedNamingTheLimit) {
  const std::vector<std::pair<std::string, std::string>> schemas = {
      {"properties", nested(R"({"type": "object", "properties": {"a": )", "{}", "}}", kDeep)},
      {"items", nested(R"({"type": "array", "items": )", "{}", "}", kDeep)},
      {"anyOf", nested(R"({"anyOf": [)", "{}", "]}", kDeep)},
      {"allOf", nested(R"({"allOf": [)", "{}", "]}", kDeep)},
      {"not", nested(R"({"not": )", "{}", "}", kDeep)},
      {"$defs", nested(R"({"$defs": {"a": )", "{}", "}}", kDeep)},
      {"a const value", R"({"const": )" + nested("[", "", "]", kDeep) + "}"},
      {"an annotation", R"({"type": "string", "description": )" + nested("{\"a\":", "1", "}", kDeep) + "}"},
  };
  for (const auto& [what, schema] : schemas) {
    expect_refused([&] { grammar::json_schema_to_gbnf(schema); }, "json schema: " + kJsonLimit, what);
    expect_refused([&] { grammar::json_schema_rules(schema, "args"); }, "json schema: " + kJsonLimit,
                   what + " (rules)");
  }
}

TEST(DeepInput, JsonSchemasJustUnderTheLimitsStillCompile) {
  // Two JSON levels per property: 63 of them and the innermost {} are 127 levels, 63 subschemas deep.
  const std::string properties =
      nested(R"({"type": "object", "properties": {"a": )", R"({"type": "integer"})", "}, \"required\": [\"a\"]}", 63);
  // One JSON level per `items`: kSchemaMaxDepth of them compile, one more does not.
  const std::string items =
      nested(R"({"type": "array", "items": )", R"({"type": "string"})", "}", grammar::kSchemaMaxDepth);
  for (const std::string* schema : {&properties, &items}) {
    expect_works([&] { grammar::parse_gbnf(grammar::json_schema_to_gbnf(*schema)); }, schema->substr(0, 40),
                 kSchemaStack);
  }
  grammar::GrammarMatcher m(
      std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(grammar::json_schema_to_gbnf(properties))));
  EXPECT_TRUE(m.accept_utf8(nested("{\"a\":", "7", "}", 63)) && m.can_end());
  expect_refused(
      [] {
        grammar::json_schema_to_gbnf(nested(R"({"type": "array", "items": )", "{}", "}", grammar::kSchemaMaxDepth + 1));
      },
      "nested deeper than " + std::to_string(grammar::kSchemaMaxDepth), "one items level too many", kSchemaStack);
}

TEST(DeepInput, LongRefChainsAndAllOfMergesAreRefusedNotRecursedInto) {
  // 1,000 $defs each referring to the next: a wide document, a deep compilation (kept to a
  // thousand: nlohmann's ordered objects insert in linear time).
  constexpr size_t kDefs = 1000;
  std::string defs;
  for (size_t i = 0; i < kDefs; ++i) {
    defs += (i ? ", " : "") + std::string("\"d") + std::to_string(i) +
            "\": {\"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/d" + std::to_string(i + 1) + "\"}}";
  }
  const std::string last = "\"d" + std::to_string(kDefs) + "\": {}";
  const std::string chain = R"({"$defs": {)" + defs + ", " + last + R"(}, "$ref": "#/$defs/d0"})";
  expect_refused([&] { grammar::json_schema_to_gbnf(chain); },
                 "nested deeper than " + std::to_string(grammar::kSchemaMaxDepth), "a $ref chain 1,000 long",
                 kSchemaStack);
  // The same chain through allOf, merged rather than compiled.
  std::string all_of_defs;
  for (size_t i = 0; i < kDefs; ++i) {
    all_of_defs += (i ? ", " : "") + std::string("\"d") + std::to_string(i) +
                   "\": {\"allOf\": [{\"$ref\": \"#/$defs/d" + std::to_string(i + 1) + "\"}]}";
  }
  const std::string all_of_chain =
      R"({"$defs": {)" + all_of_defs + ", " + last + R"(}, "allOf": [{"$ref": "#/$defs/d0"}]})";
  expect_refused([&] { grammar::json_schema_to_gbnf(all_of_chain); }, "allOf and $ref nested deeper than",
                 "an allOf $ref chain", kSchemaStack);
  // 10,000 parts each declaring its own `items`: merging them would nest the merged `items`
  // 10,000 deep.
  std::string parts = R"({"allOf": [)";
  for (size_t i = 0; i < 10000; ++i)
    parts += (i ? ", " : "") + std::string(R"({"items": {"minimum": )") + std::to_string(i) + "}}";
  parts += "]}";
  expect_refused([&] { grammar::json_schema_to_gbnf(parts); }, "parts merge into one 'items'", "10,000 allOf parts");
  // A $ref back to the root inside an anyOf that an allOf distributes: a cycle through merging.
  expect_refused([] { grammar::json_schema_to_gbnf(R"({"allOf": [{"anyOf": [{"$ref": "#"}, {"type": "null"}]}]})"); },
                 "json schema", "a $ref cycle through allOf and anyOf");
  // 2,000 $refs chained without reading (d_k is d_k+1), each first met from its own property:
  // no deep compilation, but a long path for the left-recursion check, which is iterative.
  std::string props, chained_defs;
  for (size_t k = 0; k < 2000; ++k) {
    props += (k ? ", " : "") + std::string("\"p") + std::to_string(k) + "\": {\"$ref\": \"#/$defs/d" +
             std::to_string(1999 - k) + "\"}";
    chained_defs += (k ? ", " : "") + std::string("\"d") + std::to_string(k) + "\": {\"$ref\": \"#/$defs/d" +
                    std::to_string(k + 1) + "\"}";
  }
  const std::string refs = R"({"type": "object", "properties": {)" + props + R"(}, "$defs": {)" + chained_defs +
                           R"(, "d2000": {"type": "null"}}})";
  expect_works([&] { grammar::json_schema_to_gbnf(refs); }, "2,000 chained $refs");
  // An allOf of a few parts that all declare `items` still merges as before.
  expect_works(
      [] { grammar::json_schema_to_gbnf(R"({"allOf": [{"items": {"type": "integer"}}, {"items": {"minimum": 0}}]})"); },
      "two parts with items");
}

TEST(DeepInput, PatternsWithDeeplyNestedGroupsAreRefused) {
  size_t budget = 40000;
  const std::string deep = nested("(", "a", ")", kDeep);
  expect_refused([&] { grammar::regex_to_gbnf(deep, "char", 1000, budget); },
                 "groups nested deeper than " + std::to_string(grammar::kRegexMaxNesting), "a pattern");
  expect_refused([&] { grammar::json_schema_to_gbnf(R"({"type": "string", "pattern": ")" + deep + "\"}"); },
                 "groups nested deeper than", "a schema's pattern");
  // At the limit, the pattern compiles into a grammar the GBNF parser takes.
  const std::string at_limit =
      R"({"type": "string", "pattern": "^)" + nested("(a|", "b", ")+", grammar::kRegexMaxNesting) + "$\"}";
  expect_works([&] { grammar::parse_gbnf(grammar::json_schema_to_gbnf(at_limit)); }, "a pattern at the limit");
}

// --- GBNF (engine/grammar/gbnf_parser, the matcher) ---

TEST(DeepInput, GrammarsNested50000DeepAreRefusedNamingTheLimit) {
  const std::string message =
      "nested deeper than " + std::to_string(grammar::kGbnfMaxNesting) + " levels of parentheses";
  expect_refused([] { grammar::parse_gbnf("root ::= " + nested("(", "\"a\"", ")", 50000)); }, message, "50,000 groups");
  expect_refused([] { grammar::parse_gbnf("root ::= " + nested("(\"a\" | ", "\"b\"", ")*", 50000)); }, message,
                 "50,000 alternations");
  expect_refused([] { grammar::parse_gbnf("root ::= " + nested("(", "", "", 50000)); }, message,
                 "50,000 unclosed groups");
  expect_refused([] { grammar::parse_gbnf("root ::= " + nested("(", "\"a\"", ")", grammar::kGbnfMaxNesting + 1)); },
                 message, "one level too deep");
}

TEST(DeepInput, GrammarsJustUnderTheLimitStillMatch) {
  const std::string gbnf = "root ::= " + nested("(\"a\" ", "\"b\"", ")?", grammar::kGbnfMaxNesting);
  expect_works(
      [&] {
        grammar::GrammarMatcher m(std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(gbnf)));
        if (!m.accept_utf8(std::string(grammar::kGbnfMaxNesting, 'a') + "b") || !m.can_end())
          throw Error("not matched");
      },
      "groups at the limit");
}

TEST(DeepInput, LongRuleChainsAreExpandedWithoutRecursion) {
  // root ::= r1, r1 ::= r2, ...: each rule one line, the chain as deep as the text is long.
  auto chain = [](size_t n) {
    std::string g = "root ::= r1\n";
    for (size_t i = 1; i < n; ++i) g += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + "\n";
    return g + "r" + std::to_string(n) + " ::= \"x\"\n";
  };
  const auto g = std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(chain(60000)));
  expect_works(
      [&] {
        grammar::StackStepper stepper(*g);
        grammar::StackSet set;
        stepper.add_expanded(std::vector<uint32_t>{g->rule_alternatives[g->root][0]}, set);
        if (set.size() != 1) throw Error("expected one stack");
        grammar::GrammarMatcher m(g);
        if (!m.accept_utf8("x") || !m.can_end()) throw Error("not matched");
      },
      "a chain of 60,000 rules");
  // The shortest completion writes the chain's text by following it, as deep (kept short:
  // its costs settle one rule per pass).
  const auto short_chain = std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(chain(5000)));
  expect_works(
      [&] {
        const grammar::ShortestCompletion completion(short_chain);
        if (completion.of(grammar::GrammarMatcher(short_chain)) != "x") throw Error("wrong completion");
      },
      "the completion of a chain of 5,000 rules");
}

TEST(DeepInput, InputWithinTheLimitsIsRefusedOnAStackTooSmallForIt) {
  // 96 KB: less than kStackReserve above what these need, in Release as under ASan.
  constexpr size_t kTiny = 96 * 1024;
  const std::string schema = nested(R"({"type": "object", "properties": {"a": )", "{}", "}}", 63);
  std::string error = error_on_small_stack([&] { grammar::json_schema_to_gbnf(schema); }, kTiny);
  EXPECT_NE(error.find("nested too deeply for this thread's stack"), std::string::npos) << error;
  error = error_on_small_stack(
      [] { grammar::parse_gbnf("root ::= " + nested("(", "\"a\"", ")", grammar::kGbnfMaxNesting)); }, kTiny);
  EXPECT_NE(error.find("parentheses nested too deeply for this thread's stack"), std::string::npos) << error;
  // The thread's own bounds are what is measured.
  EXPECT_EQ(error_on_small_stack(
                [] {
                  if (stack_room() >= kTiny) throw Error("stack_room() is not this thread's");
                },
                kTiny),
            "");
}

// --- tools and OpenAI chat fields (engine/chat) ---

TEST(DeepInput, ToolsNested100000DeepAreRefusedNamingTheLimit) {
  const std::string deep_parameters = R"([{"type": "function", "function": {"name": "f", "parameters": )" +
                                      nested(R"({"type": "object", "properties": {"a": )", "{}", "}}", kDeep) + "}}]";
  expect_refused([&] { chat::parse_tool_definitions(deep_parameters); }, "'tools': " + kJsonLimit, "deep parameters");
  expect_refused([] { chat::parse_tool_definitions(nested("[", "", "]", kDeep)); }, "'tools': " + kJsonLimit,
                 "a deep list");
  // Parameters just under the limit: tools, tool, function, parameters are 4 levels, then 61 properties.
  const std::string ok = R"([{"type": "function", "function": {"name": "f", "parameters": )" +
                         nested(R"({"type": "object", "properties": {"a": )", "{}", "}}", 61) + "}}]";
  expect_works(
      [&] {
        const std::vector<chat::ToolDefinition> tools = chat::parse_tool_definitions(ok);
        grammar::parse_gbnf(chat::tool_call_grammar(chat::ToolCallFormat::Hermes, tools, false, false, false).gbnf);
      },
      "parameters under the limit", kSchemaStack);
}

TEST(DeepInput, DeepToolCallRepliesStayContent) {
  const std::vector<chat::ToolDefinition> tools =
      chat::parse_tool_definitions(R"([{"type": "function", "function": {"name": "f"}}])");
  const std::string args = nested("{\"a\":", "1", "}", kDeep);
  const std::string hermes = "<tool_call>\n{\"name\": \"f\", \"arguments\": " + args + "}\n</tool_call>";
  const std::string mistral = "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": " + args + "}]";
  const std::string llama = "{\"name\": \"f\", \"parameters\": " + args + "}";
  const std::string generic = "{\"tool_calls\": [{\"name\": \"f\", \"arguments\": " + args + "}]}";
  const std::vector<std::pair<chat::ToolCallFormat, const std::string*>> replies = {
      {chat::ToolCallFormat::Hermes, &hermes},
      {chat::ToolCallFormat::Mistral, &mistral},
      {chat::ToolCallFormat::Llama3, &llama},
      {chat::ToolCallFormat::Generic, &generic}};
  for (const auto& [format, reply] : replies) {
    expect_works(
        [&] {
          const chat::ParsedReply r = chat::parse_tool_calls(format, *reply, tools);
          if (!r.calls.empty() || r.content.size() < args.size()) throw Error("a deep reply became a call");
        },
        chat::tool_call_format_name(format));
  }
  // Arguments just under the limit are a call.
  const chat::ParsedReply r = chat::parse_tool_calls(
      chat::ToolCallFormat::Llama3,
      "{\"name\": \"f\", \"parameters\": " + nested("{\"a\":", "1", "}", kMaxJsonDepth - 1) + "}", tools);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, nested("{\"a\":", "1", "}", kMaxJsonDepth - 1));
}

TEST(DeepInput, DeepChatFieldsAreRefusedNamingTheField) {
  // Built by parsing (iterative) with the deep value spliced in by text, as the ordered_json the
  // fields are read as: copying or converting a 100,000-deep nlohmann value would itself recurse.
  const std::string deep = nested("{\"a\":", "1", "}", kDeep);
  const nlohmann::ordered_json deep_content = nlohmann::ordered_json::parse(
      R"([{"role": "user", "content": [{"type": "text", "text": "hi", "extra": )" + deep + "}]}]");
  expect_refused([&] { chat::parse_messages(deep_content); }, "'messages': " + kJsonLimit, "deep content");
  const nlohmann::ordered_json deep_arguments = nlohmann::ordered_json::parse(
      R"([{"role": "assistant", "content": null, "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": )" +
      deep + "}}]}]");
  expect_refused([&] { chat::parse_messages(deep_arguments); }, "'messages': " + kJsonLimit,
                 "deep tool-call arguments");
  // Arguments as a JSON string (as OpenAI sends them), which the template renderer parses.
  const nlohmann::ordered_json deep_argument_text =
      nlohmann::ordered_json::array({{{"role", "assistant"},
                                      {"content", nullptr},
                                      {"tool_calls", {{{"function", {{"name", "f"}, {"arguments", deep}}}}}}}});
  expect_refused([&] { chat::parse_messages(deep_argument_text); }, "'messages[0].tool_calls' arguments: " + kJsonLimit,
                 "deep tool-call arguments text");
  const nlohmann::ordered_json kwargs = nlohmann::ordered_json::parse(R"({"chat_template_kwargs": )" + deep + "}");
  expect_refused([&] { chat::template_kwargs(kwargs); }, "'chat_template_kwargs': " + kJsonLimit, "deep kwargs");
  const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(
      R"({"tools": [{"type": "function", "function": {"name": "f", "parameters": )" + deep + "}}]}");
  expect_refused([&] { chat::parse_tool_request(tools, std::nullopt); }, "'tools': " + kJsonLimit, "deep tools");
  // The same fields under the limit.
  const nlohmann::ordered_json ok = nlohmann::ordered_json::parse(nested("{\"a\":", "1", "}", 100));
  EXPECT_EQ(chat::template_kwargs({{"chat_template_kwargs", ok}}), ok.dump());
  EXPECT_EQ(chat::parse_messages(nlohmann::ordered_json::array(
                {{{"role", "assistant"},
                  {"content", nullptr},
                  {"tool_calls", {{{"function", {{"name", "f"}, {"arguments", ok}}}}}}}}))[0]
                .tool_calls[0]
                .arguments,
            ok.dump());
}

// --- through the engine ---

class DeepInputEngine : public test::StoriesTest {};

TEST_F(DeepInputEngine, SubmitRefusesADeepJsonSchemaAndADeepGrammar) {
  Engine engine({.model_path = model_, .threads = 2});
  Request r = test::greedy_request(cases_.front().prompt_ids, 8);
  r.json_schema = nested(R"({"type": "object", "properties": {"a": )", "{}", "}}", kDeep);
  expect_refused([&] { engine.submit(r); }, "json schema: " + kJsonLimit, "a deep json_schema");
  r.json_schema.clear();
  r.grammar = "root ::= " + nested("(", "\"a\"", ")", 50000);
  expect_refused([&] { engine.submit(r); }, "nested deeper than " + std::to_string(grammar::kGbnfMaxNesting),
                 "a deep grammar");
  EXPECT_EQ(engine.metrics().running, 0);
  // Under the limits the engine generates as usual.
  r.grammar = "root ::= " + nested("(", "\"a\"", ")", grammar::kGbnfMaxNesting) + " [a-z ]*";
  RequestHandle h = engine.submit(r);
  EXPECT_EQ(test::await(h).text.substr(0, 1), "a");
  test::expect_engine_idle(engine);
}

}  // namespace
}  // namespace pagoda
