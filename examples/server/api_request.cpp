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

// A Responses body as a request: translated to a chat body and parsed as one. One reply, always
// split, so thinking, text and calls land in output items of their own.
ApiRequest responses_request(const std::string& text, const Engine& engine, const ModelNames& names,
                             bool special_in_content) {
  const nlohmann::ordered_json body = parse_request_body(text);
  nlohmann::ordered_json chat_body;
  try {
    chat_body = responses::responses_to_chat(body);
  } catch (const Error& e) {
    throw bad_request(e.what());
  }
  // As with Messages, a budget beyond the room the context leaves bounds the reply rather than
  // being refused: clients size max_output_tokens for hosted models (status "incomplete" says
  // when it was reached).
  std::optional<int64_t> max_tokens;
  if (chat_body.contains("max_tokens")) {
    max_tokens = chat_body["max_tokens"].get<int64_t>();  // a positive integer (responses_to_chat)
    chat_body.erase("max_tokens");
  }
  ApiRequest a = parse_api_request(Endpoint::Responses, chat_body, engine, names, special_in_content);
  if (max_tokens) a.request.max_new_tokens = int32_t(std::min<int64_t>(*max_tokens, a.request.max_new_tokens));
  a.answer_settings = responses::response_settings(body);
  if (!a.reply) a.reply = chat::ReplyShape{};
  return a;
}

}  // namespace

ApiRequest parse_request(Endpoint endpoint, const std::string& body, const Engine& engine, const ModelNames& names,
                         bool special_in_content) {
  switch (endpoint) {
    case Endpoint::Completions:
    case Endpoint::ChatCompletions: return parse_api_request(endpoint, body, engine, names, special_in_content);
    case Endpoint::Messages: break;
    case Endpoint::Responses: return responses_request(body, engine, names, special_in_content);
  }
  // Messages requires max_tokens, and clients send large ones (Claude's limits are in the tens of
  // thousands): the reply is bounded by it and by the room the context leaves, not refused.
  nlohmann::ordered_json chat_body = messages_chat_body(body, false);
  const int64_t max_tokens = chat_body["max_tokens"].get<int64_t>();
  chat_body.erase("max_tokens");
  ApiRequest a = parse_api_request(endpoint, chat_body, engine, names, special_in_content);
  a.request.max_new_tokens = int32_t(std::min<int64_t>(max_tokens, a.request.max_new_tokens));
  // One reply per request, always split: its thinking, text and calls go in blocks of their own.
  if (!a.reply) a.reply = chat::ReplyShape{};
  return a;
}

int64_t count_message_tokens(const std::string& body, const Engine& engine, const ModelNames& names,
                             bool special_in_content) {
  nlohmann::ordered_json chat_body = messages_chat_body(body, true);
  chat_body["max_tokens"] = 1;  // counted only: parse_api_request checks the prompt leaves room for a token
  return int64_t(
      parse_api_request(Endpoint::Messages, chat_body, engine, names, special_in_content).request.prompt_ids.size());
}

}  // namespace pagoda::server
