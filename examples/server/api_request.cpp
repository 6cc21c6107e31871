#include "examples/server/api_request.h"

#include <algorithm>
#include <optional>

#include "examples/server/api_error.h"
#include "examples/server/json_body.h"
#include "pagoda/error.h"
#include "protocol/anthropic_messages.h"
#include "protocol/responses_api.h"

namespace pagoda::server {

namespace {

// A Messages body as a chat body; its malformed fields are 400s.
nlohmann::ordered_json messages_chat_body(const std::string& body, bool for_count) {
  try {
    return anthropic::to_chat_body(parse_request_body(body), for_count);
  } catch (const Error& e) {
    throw bad_request(e.what());
  }
}

// A translated chat body parsed as a chat request. Its `max_tokens` bounds the reply together
// with the room the context leaves instead of being refused when larger: clients size it for
// hosted models (Claude's limits run to tens of thousands; a cut reply says so). One reply,
// always split, so thinking, text and calls land in blocks or items of their own.
ApiRequest parse_translated(Endpoint endpoint, nlohmann::ordered_json chat_body, const Engine& engine,
                            const ModelNames& names, bool special_in_content) {
  std::optional<int64_t> max_tokens;
  if (auto it = chat_body.find("max_tokens"); it != chat_body.end()) {
    max_tokens = it->get<int64_t>();  // a positive integer: the translations check it
    chat_body.erase(it);
  }
  ApiRequest a = parse_api_request(endpoint, chat_body, engine, names, special_in_content);
  if (max_tokens) a.request.max_new_tokens = int32_t(std::min<int64_t>(*max_tokens, a.request.max_new_tokens));
  if (!a.reply) a.reply = chat::ReplyShape{};
  return a;
}

ApiRequest responses_request(const std::string& text, const Engine& engine, const ModelNames& names,
                             bool special_in_content) {
  const nlohmann::ordered_json body = parse_request_body(text);
  nlohmann::ordered_json chat_body;
  try {
    chat_body = responses::responses_to_chat(body);
  } catch (const Error& e) {
    throw bad_request(e.what());
  }
  ApiRequest a = parse_translated(Endpoint::Responses, std::move(chat_body), engine, names, special_in_content);
  a.answer_settings = responses::response_settings(body);
  return a;
}

}  // namespace

ApiRequest parse_request(Endpoint endpoint, const std::string& body, const Engine& engine, const ModelNames& names,
                         bool special_in_content) {
  switch (endpoint) {
    case Endpoint::Responses: return responses_request(body, engine, names, special_in_content);
    case Endpoint::Messages:
      return parse_translated(endpoint, messages_chat_body(body, false), engine, names, special_in_content);
    case Endpoint::Completions:
    case Endpoint::ChatCompletions: break;
  }
  return parse_api_request(endpoint, body, engine, names, special_in_content);
}

int64_t count_message_tokens(const std::string& body, const Engine& engine, const ModelNames& names,
                             bool special_in_content) {
  nlohmann::ordered_json chat_body = messages_chat_body(body, true);
  chat_body["max_tokens"] = 1;  // counted only: parse_api_request checks the prompt leaves room for a token
  return int64_t(
      parse_api_request(Endpoint::Messages, chat_body, engine, names, special_in_content).request.prompt_ids.size());
}

}  // namespace pagoda::server
