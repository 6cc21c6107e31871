#pragma once
// llama-server's POST /apply-template: a chat body ({"messages", "tools"?,
// "chat_template_kwargs"?, "add_generation_prompt"?}) rendered with the model's chat template,
// answered as {"prompt": "..."} without generating anything.

#include <string>

#include <nlohmann/json.hpp>

#include "pagoda/engine.h"

namespace pagoda::server {

// Throws ApiError (400) for a malformed body and for a template that fails on it.
nlohmann::json apply_template(const std::string& body, const Engine& engine);

}  // namespace pagoda::server
