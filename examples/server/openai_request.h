#pragma once
// OpenAI's /v1/completions and /v1/chat/completions bodies → a pagoda::Request, with every
// parameter checked: a wrong type, a value out of range, an unsupported option or a prompt
// beyond the context is an ApiError (400) whose message names the field; an unknown `model`
// is a 404.

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol/chat_reply.h"
#include "examples/server/model_names.h"
#include "pagoda/engine.h"
#include "pagoda/request.h"

namespace pagoda::server {

// The API a request came through. Responses and Messages bodies are translated to chat bodies
// (protocol/responses_api, protocol/anthropic_messages) and parsed as chat requests.
enum class Endpoint { Completions, ChatCompletions, Responses, Messages };

struct ApiRequest {
  Endpoint endpoint = Endpoint::Completions;
  Request request;    // prompt_ids filled in, tokenized here so the usage counts are known
  std::string model;  // as the client named it (the base model's name when it named none)
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with only the usage
  int32_t n = 1;               // choices returned
  int32_t best_of = 1;         // completions: choices generated, the n most likely returned
  bool echo = false;           // completions: the prompt comes back before the completion
  // Every prompt's ids (request.prompt_ids is the first's): completions may batch several, each
  // with its own n choices (choice i belongs to prompt i / best_of); chat has one.
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::string> prompt_texts;  // completions: each prompt as sent (its ids' text when ids)
  // The request's own stop strings (`stop`), before a chat format's are added to Request's.
  std::vector<std::string> stop;
  // Chat: what the reply holds besides text (thinking, tool calls), when it may hold any;
  // such replies are split by chat::ChatReplySplitter.
  std::optional<chat::ReplyShape> reply;
  // Responses: the request's settings its answer repeats (protocol/responses_api's
  // response_settings); null for the other APIs.
  nlohmann::ordered_json answer_settings;
};

// The body's `model`: the base model or a loaded adapter (its name as the client gave it, the base
// model's when it gave none). ApiError 404 for a name the server does not serve, 400 for one that
// is not a string.
struct ServedModel {
  std::string name;
  std::string adapter;  // Request::adapter: "" for the base model
};
ServedModel served_model(const nlohmann::ordered_json& body, const ModelNames& names);

// Parses `body` for `endpoint`. Throws ApiError. A chat prompt is tokenized with its data spans,
// so control tokens typed into messages stay text; `special_in_content` parses them as control
// tokens, as before (ChatTemplateOptions::special_in_content).
ApiRequest parse_api_request(Endpoint endpoint, const std::string& body, const Engine& engine, const ModelNames& names,
                             bool special_in_content = false);
// The same for a body already parsed (by parse_request_body): Responses and Messages bodies
// translated to chat bodies. Any endpoint but Completions reads `body` as a chat request.
ApiRequest parse_api_request(Endpoint endpoint, const nlohmann::ordered_json& body, const Engine& engine,
                             const ModelNames& names, bool special_in_content = false);

}  // namespace pagoda::server
