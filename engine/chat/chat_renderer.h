#pragma once
// A conversation through a model's Jinja chat template: ChatMessages and ChatTemplateOptions
// become the variables transformers' apply_chat_template gives a template (messages as OpenAI
// message objects, tools, add_generation_prompt, bos_token, eos_token and the extra kwargs).

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/jinja/template.h"
#include "pagoda/chat.h"

namespace pagoda::chat {

// The template's variables. A tool call's arguments become a JSON object (the form templates
// expect) when they parse as one and stay a string otherwise; an assistant turn with tool calls
// and no text has content null, as OpenAI sends it (or "" without `null_content`). Throws
// pagoda::Error when options.tools is not a JSON array or options.kwargs not a JSON object, or
// when they or a tool call's arguments nest deeper than kMaxJsonDepth (engine/util/json_depth.h).
nlohmann::ordered_json template_context(const std::vector<ChatMessage>& messages, const ChatTemplateOptions& options,
                                        const std::string& bos_token, const std::string& eos_token,
                                        bool null_content = true);

// The template rendered with template_context; a template that fails on a null content is
// rendered again with "" there, as llama.cpp does for templates older than null contents.
std::string render_chat(const jinja::Template& t, const std::vector<ChatMessage>& messages,
                        const ChatTemplateOptions& options, const std::string& bos_token, const std::string& eos_token);
// The same, with the ranges printed from messages, tools and kwargs as its data spans (none
// with options.special_in_content).
ChatPrompt render_chat_prompt(const jinja::Template& t, const std::vector<ChatMessage>& messages,
                              const ChatTemplateOptions& options, const std::string& bos_token,
                              const std::string& eos_token);

}  // namespace pagoda::chat
