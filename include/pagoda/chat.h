#pragma once
// Chat messages and the model's chat format, for Engine::apply_chat_template.

#include <cstdint>
#include <string>
#include <vector>

namespace pagoda {

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant" ("developer" is read as "system")
  std::string content;
};

// How the model lays out a conversation, recognised from its GGUF tokenizer.chat_template.
struct ChatFormat {
  // llama.cpp's name of the template family ("chatml", "llama3", "llama2-sys", "mistral-v7",
  // "zephyr", "gemma", "phi3", "vicuna", ...), or "plain" when the model has no template or
  // one pagoda does not recognise: the messages' text, each turn on a new line, which the
  // model simply continues.
  std::string family;
  // What ends the assistant's turn, so generation stops there: the token when the vocabulary
  // has it as one token (<|im_end|>, <|eot_id|>), else its spelling as a stop string.
  std::vector<int32_t> stop_token_ids;
  std::vector<std::string> stop_strings;
};

}  // namespace pagoda
