// Engine::apply_chat_template with a model's Jinja template: the conversation (tool calls, tool
// turns, reasoning), tools and extra kwargs reach the template as transformers passes them, so
// the prompt equals Python jinja2's; EngineConfig::chat_template overrides the GGUF one; a
// template that does not parse falls back to its family's layout; a failing render is an error.

#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "pagoda/engine.h"
#include "pagoda/error.h"
#include "support/chat_models.h"
#include "support/jinja_oracle.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

using json = nlohmann::ordered_json;

// Prints every variable the Engine passes, so the comparison covers them all.
const char* const kEchoTemplate =
    "{{ bos_token }}|{{ eos_token }}|{{ add_generation_prompt }}|{{ enable_thinking is defined and enable_thinking }}\n"
    "{% for m in messages %}{{ m | tojson }}\n{% endfor %}"
    "{% if tools is defined %}{{ tools | tojson(indent=1) }}{% endif %}";

const char* const kTools =
    R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])";

std::vector<ChatMessage> conversation() {
  ChatMessage call{
      "assistant", "", {{"call_1", "get_weather", R"({"city": "Paris", "days": 2})"}, {"call_2", "raw", "not json"}}};
  call.reasoning_content = "The user wants weather.";
  ChatMessage result{"tool", "{\"t\": 21}"};
  result.tool_call_id = "call_1";
  result.name = "get_weather";
  return {{"system", "Be brief."}, {"user", "Weather?"}, call, result};
}

TEST(EngineChatJinja, VariablesReachTheTemplateAsTransformersPassesThem) {
  if (const std::string why = test::jinja_oracle_missing(); !why.empty()) GTEST_SKIP() << why << "; skipping";
  const std::string path = test::tiny_model_with_template("engine-jinja-echo.gguf", kEchoTemplate, false);
  Engine engine({.model_path = path, .threads = 1, .kv_pages = 64});
  ChatTemplateOptions options;
  options.add_generation_prompt = false;
  options.tools = kTools;
  options.kwargs = R"({"enable_thinking": true})";
  const std::string prompt = engine.apply_chat_template(conversation(), options);

  const json context = json::parse(R"({
    "enable_thinking": true,
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": null, "reasoning_content": "The user wants weather.", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}},
        {"id": "call_2", "type": "function", "function": {"name": "raw", "arguments": "not json"}}]},
      {"role": "tool", "content": "{\"t\": 21}", "tool_call_id": "call_1", "name": "get_weather"}],
    "add_generation_prompt": false})");
  json with_tokens = context;
  with_tokens["tools"] = json::parse(kTools);
  // the vocabulary's spellings of BOS and EOS
  for (const Engine::SpecialToken& t : engine.special_tokens()) {
    if (t.id == 1) with_tokens["bos_token"] = t.piece;
    if (t.id == engine.eos_id()) with_tokens["eos_token"] = t.piece;
  }
  ASSERT_TRUE(with_tokens.contains("bos_token") && with_tokens.contains("eos_token"));
  const auto expected =
      test::run_jinja_oracle(json::array({json{{"template", kEchoTemplate}, {"context", with_tokens}}}));
  ASSERT_TRUE(expected[0].ok) << expected[0].output;
  // The tokenizer adds the BOS, so the template's own is left out.
  ASSERT_TRUE(engine.add_bos());
  const std::string bos = with_tokens["bos_token"].get<std::string>();
  ASSERT_EQ(expected[0].output.substr(0, bos.size()), bos);
  EXPECT_EQ(prompt, expected[0].output.substr(bos.size()));
}

// Llama 3's and Gemma's templates begin with {{ bos_token }}: the prompt still starts with one
// BOS, not two; a BOS elsewhere in the text stays.
TEST(EngineChatJinja, ATemplatesOwnBosIsNotDoubled) {
  const std::string path = test::tiny_model_with_template(
      "engine-jinja-bos.gguf", "{{ bos_token }}{% for m in messages %}{{ m.content }}{{ bos_token }}{% endfor %}",
      false);
  Engine engine({.model_path = path, .threads = 1, .kv_pages = 64});
  ASSERT_TRUE(engine.add_bos());
  const std::string prompt = engine.apply_chat_template({{"user", "hi"}});
  const std::vector<int32_t> ids = engine.tokenize(prompt, engine.add_bos(), true);
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids[0], 1);
  EXPECT_NE(ids[1], 1);
  EXPECT_EQ(ids.back(), 1);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 1), 2);
}

TEST(EngineChatJinja, ConfigTemplateOverridesTheModels) {
  const std::string path = test::tiny_model_with_template("engine-jinja-chatml.gguf", test::kChatmlJinja, true);
  Engine engine({.model_path = path,
                 .chat_template = "{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}{% if "
                                  "add_generation_prompt %}>{% endif %}",
                 .threads = 1,
                 .kv_pages = 64});
  EXPECT_EQ(engine.apply_chat_template({{"user", "hi"}}), "[user:hi]>");
  EXPECT_EQ(engine.apply_chat_template({{"user", "hi"}, {"tool", "42"}}, false), "[user:hi][tool:42]");
  EXPECT_NE(engine.chat_template()->find("[{{ m.role }}"), std::string::npos);
}

TEST(EngineChatJinja, UnparsableTemplateFallsBackToItsFamily) {
  // ChatML by its markers, but with a tag pagoda (and jinja2) cannot parse
  const std::string broken = std::string(test::kChatmlJinja) + "{% frobnicate %}";
  const std::string path = test::tiny_model_with_template("engine-jinja-broken.gguf", broken, true);
  Engine engine({.model_path = path, .threads = 1, .kv_pages = 64});
  EXPECT_EQ(engine.chat_format().family, "chatml");
  EXPECT_EQ(engine.apply_chat_template({{"user", "hello"}}),
            "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n");
}

TEST(EngineChatJinja, FailingRenderAndBadOptionsAreErrors) {
  const std::string path = test::tiny_model_with_template(
      "engine-jinja-raise.gguf", "{% if messages[0].role != 'user' %}{{ raise_exception('user first') }}{% endif %}ok",
      false);
  Engine engine({.model_path = path, .threads = 1, .kv_pages = 64});
  EXPECT_EQ(engine.apply_chat_template({{"user", "x"}}), "ok");
  try {
    engine.apply_chat_template({{"assistant", "x"}});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("template line 1: raise_exception: user first"), std::string::npos)
        << e.what();
  }
  ChatTemplateOptions bad_tools;
  bad_tools.tools = "{\"not\": \"an array\"}";
  EXPECT_THROW(engine.apply_chat_template({{"user", "x"}}, bad_tools), Error);
  ChatTemplateOptions bad_kwargs;
  bad_kwargs.kwargs = "[1, 2";
  EXPECT_THROW(engine.apply_chat_template({{"user", "x"}}, bad_kwargs), Error);
}

}  // namespace
}  // namespace pagoda
