// Chat templates: the family detection and layouts against llama.cpp's expected prompts
// (tests/test-chat-template.cpp there), and the Engine's public chat API on a tiny model with a ChatML template.

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/chat/chat_template.h"
#include "pagoda/engine.h"
#include "pagoda/error.h"
#include "support/chat_models.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

using chat::Family;

struct DetectCase {
  const char* name;
  std::string jinja;
  std::optional<Family> family;
};

std::vector<DetectCase> detect_cases() {
  return {
      {"OpenHermes-2.5 (ChatML)", test::kChatmlJinja, Family::ChatML},
      {"Mistral-7B-Instruct-v0.2, pre-v1",
       "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + "
       "message['content'] + "
       "' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% endif %}{% endfor "
       "%}",
       Family::Llama2},
      {"Llama-2-chat (no strip)",
       "{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
       "'\\n<</SYS>>\\n\\n' + message['content'] %}{% endif %}{{ '[INST] ' + content + ' [/INST]' }}",
       Family::Llama2Sys},
      {"FusionNet_34Bx2_MoE",
       "{%- if idx > 1 -%}{{- bos_token + '[INST] ' + messages[idx]['content'] + ' [/INST]' -}}{%- endif -%}"
       "{{- '[INST] <<SYS>>\\n' + messages[idx]['content'] + '\\n<</SYS>>\\n\\n' -}}",
       Family::Llama2SysBos},
      {"vigogne-2-70b-chat",
       "{% set content = '<<SYS>>\\n' + system_message %}{{ '[INST] ' + content.strip() + ' [/INST]' }}",
       Family::Llama2SysStrip},
      {"Mistral v1 (official)",
       "{{- ' [INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}{{- ' ' + message['content'] + "
       "eos_token}}",
       Family::MistralV1},
      {"Mistral-Large-Instruct-2407 (v3)",
       "{{- \"[AVAILABLE_TOOLS] [\" }}{{- \"[INST] \" + message[\"content\"] + \"[/INST]\" }}", Family::MistralV3},
      {"Mistral-Nemo-Instruct-2407 (v3-tekken)",
       "{{- \"[AVAILABLE_TOOLS][\" }}{{- \"[INST]\" + message[\"content\"] + \"[/INST]\" }}", Family::MistralV3Tekken},
      {"Mistral-Large-Instruct-2411 (v7)",
       "{{ '[INST] ' + message['content'] + '[/INST]' }}{{ '[SYSTEM_PROMPT] ' + message['content'] + "
       "'[/SYSTEM_PROMPT]' }}",
       Family::MistralV7},
      {"Phi-3-mini",
       "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') %}{{'<|user|>' + '\\n' + "
       "message['content'] + '<|end|>' + '\\n' + '<|assistant|>' + '\\n'}}{% endif %}{% endfor %}",
       Family::Phi3},
      {"TinyLlama-1.1B-Chat (Zephyr)",
       "{% if message['role'] == 'user' %}\n{{ '<|user|>\\n' + message['content'] + eos_token }}\n{% elif "
       "message['role'] == 'assistant' %}\n{{ '<|assistant|>\\n'  + message['content'] + eos_token }}\n{% endif %}",
       Family::Zephyr},
      {"gemma-7b-it",
       "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{% if "
       "add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}",
       Family::Gemma},
      {"vicuna-13b-1.1",
       "{{-'USER: ' + message['content'] + '\\n'-}}{{-'ASSISTANT: ' + message['content'] + '</s>\\n' -}}",
       Family::Vicuna},
      {"Orca-Vicuna",
       "{{-'SYSTEM: ' + message['content'] + '\\n' -}}{{-'USER: ' + message['content'] + '\\n'-}}{{-'ASSISTANT: ' + "
       "message['content'] + '</s>\\n' -}}",
       Family::VicunaOrca},
      {"Llama-3",
       "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | "
       "trim "
       "+ '<|eot_id|>' %}",
       Family::Llama3},
      {"deepseek-coder (not supported)", "{{'### Instruction:\\n' + message['content'] + '\\n'}}{{'\\n<|EOT|>\\n'}}",
       std::nullopt},
      {"command-r (not supported)", "{{ '<|START_OF_TURN_TOKEN|><|USER_TOKEN|>' + content.strip() }}", std::nullopt},
      {"plain Jinja", "{% for m in messages %}{{ m['content'] }}{% endfor %}", std::nullopt},
  };
}

TEST(ChatTemplate, DetectsTheFamilyOfWellKnownTemplates) {
  for (const DetectCase& c : detect_cases()) {
    const auto t = chat::detect_template(c.jinja, "</s>");
    ASSERT_EQ(t.has_value(), c.family.has_value()) << c.name;
    if (t) {
      EXPECT_EQ(chat::family_name(t->family), std::string(chat::family_name(*c.family))) << c.name;
    }
  }
}

TEST(ChatTemplate, ZephyrEndsTurnsWithTheTemplatesMarkerElseTheModelsEos) {
  EXPECT_EQ(chat::detect_template("{{ '<|user|>\\n' + message['content'] + eos_token }}", "</s>")->end_of_turn, "</s>");
  EXPECT_EQ(chat::detect_template("{{ '<|user|>\\n' + message['content'] + '<|endoftext|>' }}", "</s>")->end_of_turn,
            "<|endoftext|>");
}

// llama.cpp's test conversation: every family gives the prompt llama.cpp's test expects.
const std::vector<ChatMessage> kConversation = {
    {"system", "You are a helpful assistant"},
    {"user", "Hello"},
    {"assistant", "Hi there"},
    {"user", "Who are you"},
    {"assistant", "   I am an assistant   "},
    {"user", "Another question"},
};

// The family llama.cpp names `name`.
Family family_named(const std::string& name) {
  for (int f = 0; f <= int(Family::VicunaOrca); ++f) {
    if (chat::family_name(Family(f)) == name) return Family(f);
  }
  ADD_FAILURE() << "no family is named " << name;
  return Family::Plain;
}

// tests/data/chat_template_layouts.json: for each family and end-of-turn marker, the prompt
// llama.cpp's test expects for kConversation.
TEST(ChatTemplate, LaysOutTurnsAsLlamaCppDoes) {
  const nlohmann::json cases =
      nlohmann::json::parse(test::read_file(std::string(PAGODA_SOURCE_DIR) + "/tests/data/chat_template_layouts.json"));
  ASSERT_EQ(cases.size(), 16u);
  for (const nlohmann::json& c : cases) {
    const std::string family = c.at("family"), end_of_turn = c.at("end_of_turn");
    const std::string expected = c.at("expected");
    EXPECT_EQ(chat::apply_template({family_named(family), end_of_turn}, kConversation, true), expected)
        << family << " ending turns with " << end_of_turn;
  }
}

TEST(ChatTemplate, WithoutTheGenerationPromptTheAssistantHeaderIsLeftOff) {
  const std::vector<ChatMessage> turn = {{"user", "Hi"}};
  EXPECT_EQ(chat::apply_template({Family::ChatML, "<|im_end|>"}, turn, false), "<|im_start|>user\nHi<|im_end|>\n");
  EXPECT_EQ(chat::apply_template({Family::Llama3, "<|eot_id|>"}, turn, false),
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
  EXPECT_EQ(chat::apply_template({Family::Gemma, "<end_of_turn>"}, turn, false),
            "<start_of_turn>user\nHi<end_of_turn>\n");
}

TEST(ChatTemplate, PlainPutsEachTurnButARepliesOnANewLine) {
  const std::vector<ChatMessage> chat = {
      {"system", "Be brief."}, {"user", "Once"}, {"assistant", " upon"}, {"user", "a time"}};
  EXPECT_EQ(chat::apply_template({}, chat, true), "Be brief.\nOnce upon\na time");
}

TEST(ChatTemplate, UnknownRoleIsAnErrorNamingIt) {
  try {
    chat::apply_template({Family::ChatML, "<|im_end|>"}, {{"tool", "42"}}, true);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'tool'"), std::string::npos) << e.what();
  }
  EXPECT_EQ(chat::apply_template({Family::ChatML, "<|im_end|>"}, {{"developer", "x"}}, false),
            "<|im_start|>system\nx<|im_end|>\n");
}

TEST(EngineChat, ChatmlModelRendersTokenizesAndStopsAtItsTurnEnd) {
  const std::string path = test::tiny_model_with_template("engine-chatml.gguf", test::kChatmlJinja, true);
  Engine engine({.model_path = path, .threads = 1, .kv_pages = 64});
  const ChatFormat format = engine.chat_format();
  EXPECT_EQ(format.family, "chatml");
  const int32_t im_start = engine.vocab_size() - 2, im_end = engine.vocab_size() - 1;
  EXPECT_EQ(format.stop_token_ids, std::vector<int32_t>{im_end});
  EXPECT_TRUE(format.stop_strings.empty());

  const std::string prompt = engine.apply_chat_template({{"user", "hello"}});
  EXPECT_EQ(prompt, "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n");
  const std::vector<int32_t> ids = engine.tokenize(prompt, engine.add_bos(), true);
  std::vector<int32_t> expected = engine.tokenize("", engine.add_bos());
  auto append = [&](const std::vector<int32_t>& part) { expected.insert(expected.end(), part.begin(), part.end()); };
  expected.push_back(im_start);
  append(engine.tokenize("user\nhello", false));
  expected.push_back(im_end);
  append(engine.tokenize("\n", false));
  expected.push_back(im_start);
  append(engine.tokenize("assistant\n", false));
  EXPECT_EQ(ids, expected);

  const std::vector<int32_t> literal = engine.tokenize(prompt, false, false);
  EXPECT_EQ(std::count(literal.begin(), literal.end(), im_start), 0) << "without parse_special the spelling is text";
}

TEST(EngineChat, ModelWithoutATemplateIsPlain) {
  Engine engine({.model_path = test::tiny_gqa_model(), .threads = 1, .kv_pages = 64});
  EXPECT_EQ(engine.chat_format().family, "plain");
  EXPECT_TRUE(engine.chat_format().stop_token_ids.empty());
  EXPECT_EQ(engine.apply_chat_template({{"user", "a"}, {"assistant", "b"}, {"user", "c"}}), "ab\nc");
}

}  // namespace
}  // namespace pagoda
