#pragma once
// llama-server's POST /apply-template: a chat body ({"messages", "tools"?,
// "chat_template_kwargs"?, "add_generation_prompt"?}) rendered with the model's chat template,
// answered as {"prompt": "...", "data_spans": [[begin, end], ...]} without generating anything:
// data_spans are the byte ranges of the prompt copied from the messages, tools and kwargs,
// where control-token spellings stay text (none with `special_in_content`).

#include <string>

#include <nlohmann/json.hpp>

#include "pagoda/engine.h"

namespace pagoda::server {

// Throws ApiError (400) for a malformed body and for a template that fails on it.
nlohmann::ordered_json apply_template(const std::string& body, const Engine& engine, bool special_in_content = false);

}  // namespace pagoda::server
