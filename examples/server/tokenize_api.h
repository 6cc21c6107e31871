#pragma once
// llama-server's POST /tokenize and POST /detokenize (vLLM's field names are read too):
//   /tokenize   {"content" | "prompt": text, "add_special": false, "parse_special": true,
//                "with_pieces": false} → {"tokens": [ids] or [{"id", "piece"}], "count", "max_model_len"}
//   /detokenize {"tokens": [ids]} → {"content": text, "prompt": text}
// A piece that is not whole UTF-8 (part of a character) is given as its bytes, as llama-server does.

#include <string>

#include <nlohmann/json.hpp>

#include "pagoda/engine.h"

namespace pagoda::server {

// Throw ApiError (400) naming the field for a malformed body.
nlohmann::ordered_json tokenize_json(const std::string& body, const Engine& engine);
nlohmann::ordered_json detokenize_json(const std::string& body, const Engine& engine);

}  // namespace pagoda::server
