#pragma once
// Chat messages and the model's chat format, for Engine::apply_chat_template and render_chat.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace pagoda {

// A function call the assistant made, as OpenAI's chat API spells it.
struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text of an object, e.g. {"city": "Paris"}
};

struct ChatMessage {
  // "system", "user", "assistant" or "tool" ("developer" is read as "system" by the built-in
  // layouts; a model's Jinja template decides for itself)
  std::string role;
  std::string content;
  std::vector<ToolCall> tool_calls;  // an assistant turn's calls
  std::string tool_call_id;          // a tool turn: the call it answers
  std::string name;                  // a tool turn: the function's name
  std::string reasoning_content;     // an assistant turn's thinking, for templates that show it
};

// How Engine::apply_chat_template renders a conversation with the model's Jinja template.
struct ChatTemplateOptions {
  bool add_generation_prompt = true;
  std::string tools;   // JSON text of an array of OpenAI tool objects; empty: no `tools` variable
  std::string kwargs;  // JSON text of an object of extra template variables, e.g. {"enable_thinking": false}
  // Whether control tokens written in message data ("<|im_end|>" typed into a user's content)
  // are parsed as control tokens, as pagoda did before data spans: off, a user cannot end a
  // turn or forge a system turn by typing its markup. Only for trusted callers that rely on it.
  bool special_in_content = false;
};

// A byte range [begin, end) of a text.
struct TextSpan {
  size_t begin = 0;
  size_t end = 0;
  bool operator==(const TextSpan&) const = default;
};

// A rendered chat prompt and where in it the conversation's data lies: the bytes the template
// copied from messages (content, content parts, names, tool calls and results, reasoning),
// from the tool definitions and from the template kwargs (a role the chat API knows, such as
// "user", is template text: templates spell control tokens around it). Engine::tokenize(const
// ChatPrompt&) parses control tokens only in the template's own text, so data is always plain
// text.
struct ChatPrompt {
  std::string text;
  std::vector<TextSpan> data_spans;  // sorted, disjoint, byte offsets into text
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
