#include "python/chat_prompt.h"

#include <nlohmann/json.hpp>

#include "engine/util/json_depth.h"
#include "pagoda/error.h"
#include "protocol/openai_chat.h"

namespace pagoda::python {

PreparedChat prepare_chat(const Engine& engine, const std::string& text, bool add_generation_prompt, bool constrain,
                          bool special_in_content, const std::string& image_marker) {
  // Ordered: the tools and arguments reach the template in the order the dicts were built in.
  const nlohmann::ordered_json body = parse_ordered_json_bounded(text, "the chat", false);
  if (!body.is_object() || !body.contains("messages")) throw Error("a chat needs messages");
  chat::ChatImages images;
  if (!image_marker.empty()) images.marker = image_marker;
  std::vector<ChatMessage> messages = chat::parse_messages(body["messages"], engine.takes_images() ? &images : nullptr);
  const std::optional<std::string> chat_template = engine.chat_template();
  const std::optional<chat::ToolRequest> tools = chat::parse_tool_request(body, chat_template);
  ChatTemplateOptions options;
  options.add_generation_prompt = add_generation_prompt;
  options.kwargs = chat::template_kwargs(body);
  options.special_in_content = special_in_content;
  if (tools) chat::offer_tools(*tools, messages, options);
  PreparedChat p;
  p.prompt = engine.render_chat(messages, options);
  std::vector<int32_t> positions;
  p.prompt_ids = engine.tokenize(p.prompt, engine.add_bos(), images.images.empty() ? "" : images.marker, positions);
  if (positions.size() != images.images.size()) {
    throw Error("the chat template placed " + std::to_string(positions.size()) + " of the " +
                std::to_string(images.images.size()) + " images in the prompt");
  }
  for (size_t i = 0; i < positions.size(); ++i) p.images.push_back({std::move(images.images[i]), positions[i]});
  if (tools && constrain) {
    auto is_control_token = [&](std::string_view t) {
      const std::string control(t);
      return engine.tokenize(control, false, true).size() == 1 && engine.tokenize(control, false, false).size() > 1;
    };
    const chat::ToolGrammar g = chat::tool_request_grammar(*tools, is_control_token);
    p.grammar = g.gbnf;
    p.triggers = g.triggers;
  }
  p.shape = chat::reply_shape(chat_template, p.prompt.text, tools);
  return p;
}

}  // namespace pagoda::python
