#pragma once
// The Python package's chat requests laid out as pagoda-server lays them out: an OpenAI chat body
// read by protocol/openai_chat, rendered by the engine's template, tokenized, with the tool-call
// grammar and the reply's shape; image parts become images placed in the prompt's ids.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pagoda/engine.h"
#include "protocol/chat_reply.h"

namespace pagoda::python {

// An OpenAI chat body (messages, tools, tool_choice, parallel_tool_calls, chat_template_kwargs)
// as pagoda-server reads it: the prompt with its data spans and its token ids (control tokens
// typed into messages stay text unless `special_in_content`), the images of image_url parts at
// their positions in those ids, the grammar of the tool calls (with `constrain`), and the
// reply's shape.
struct PreparedChat {
  ChatPrompt prompt;
  std::vector<int32_t> prompt_ids;
  std::vector<RequestImage> images;
  std::string grammar;
  std::vector<std::string> triggers;
  std::optional<chat::ReplyShape> shape;
};

// `body` is the chat's JSON text. Each image part stands in `prompt.text` as `image_marker`, or,
// when it is empty, as a marker drawn at random (protocol/image_parts.h), so no text in a message
// can stand for an image. Throws pagoda::Error for a malformed body, an image part on an engine
// that takes no images, or a template that leaves an image out of the prompt.
PreparedChat prepare_chat(const Engine& engine, const std::string& body, bool add_generation_prompt, bool constrain,
                          bool special_in_content, const std::string& image_marker);

}  // namespace pagoda::python
