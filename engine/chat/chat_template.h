#pragma once
// Chat prompts without a Jinja interpreter, as llama.cpp's llama_chat_apply_template does it:
// recognise a well-known template family by distinctive substrings of the model's
// tokenizer.chat_template, then lay the turns out in that family's format in C++.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pagoda/chat.h"

namespace pagoda::chat {

enum class Family {
  Plain,  // no template (or an unknown one): the text the model continues
  ChatML,
  Llama2,          // [INST] ... [/INST], a system message folded into the first turn
  Llama2Sys,       // with <<SYS>> ... <</SYS>>
  Llama2SysBos,    // and <s> before each later [INST]
  Llama2SysStrip,  // and contents stripped of surrounding whitespace
  MistralV1,
  MistralV3,
  MistralV3Tekken,
  MistralV7,
  Phi3,
  Zephyr,
  Gemma,
  Llama3,
  Vicuna,
  VicunaOrca,
};

struct Template {
  Family family = Family::Plain;
  std::string end_of_turn;  // what closes a turn; generation stops there (empty for Plain)
};

// llama.cpp's names for the families; "plain" for Plain.
const char* family_name(Family f);

// The family of a Jinja chat template, checked in llama.cpp's order; nullopt when none matches.
// `eos_token` is the model's EOS spelling, which some templates end their turns with.
//
// One deliberate difference: llama.cpp sends templates with <|user|> and <|assistant|> but no
// literal "</s>" to GLM-Edge, which misses Zephyr-7B and TinyLlama-Chat (they write eos_token);
// here any <|user|> template that is not Phi-3 is Zephyr, ending turns with <|endoftext|> when
// the template names it and with the model's EOS otherwise.
std::optional<Template> detect_template(std::string_view jinja, std::string_view eos_token);

// The prompt for `chat` in the template's format; with `add_generation_prompt`, ending with the
// header that opens the assistant's reply (families without one end where the reply begins
// anyway). Roles are "system", "user" and "assistant" ("developer" counts as "system"); any
// other role is a pagoda::Error naming it.
std::string apply_template(const Template& t, const std::vector<ChatMessage>& chat, bool add_generation_prompt = true);
// The same prompt with the messages' text as its data spans.
ChatPrompt apply_template_prompt(const Template& t, const std::vector<ChatMessage>& chat,
                                 bool add_generation_prompt = true);

}  // namespace pagoda::chat
