#include "examples/server/openai_response.h"

#include <chrono>
#include <random>

namespace pagoda::server {

using nlohmann::json;

ResponseHeader response_header(const ApiRequest& request, uint64_t serial) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const char* prefix = "cmpl-";
  switch (request.endpoint) {
    case Endpoint::Completions: break;
    case Endpoint::ChatCompletions: prefix = "chatcmpl-"; break;
    case Endpoint::Responses: prefix = "resp_"; break;
    case Endpoint::Messages: prefix = "msg_"; break;
  }
  return {prefix + std::to_string(serial), std::chrono::duration_cast<std::chrono::seconds>(now).count(), request.model,
          request.endpoint};
}

const char* openai_finish_reason(FinishReason reason) { return reason == FinishReason::Length ? "length" : "stop"; }

json usage_json(int64_t prompt_tokens, int64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

namespace {

json envelope(const ResponseHeader& h, const char* object) {
  return {{"id", h.id}, {"object", object}, {"created", h.created}, {"model", h.model}};
}

}  // namespace

json completion_json(const ResponseHeader& h, const std::vector<Choice>& choices, int64_t prompt_tokens,
                     int64_t completion_tokens) {
  const bool chat = h.endpoint == Endpoint::ChatCompletions;
  json body = envelope(h, chat ? "chat.completion" : "text_completion");
  body["choices"] = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    json choice = {{"index", i},
                   {"finish_reason", openai_finish_reason(choices[i].finish_reason)},
                   {"logprobs", choices[i].logprobs}};
    if (chat) {
      const Choice& c = choices[i];
      json message = {{"role", "assistant"}, {"content", c.text}};
      if (!c.tool_calls.empty()) {
        if (c.text.empty()) message["content"] = nullptr;  // as OpenAI's, for a reply that only calls
        message["tool_calls"] = tool_calls_json(c.tool_calls, false);
        choice["finish_reason"] = "tool_calls";
      }
      if (!c.reasoning.empty()) message["reasoning_content"] = c.reasoning;
      choice["message"] = message;
    } else {
      choice["text"] = choices[i].text;
    }
    body["choices"].push_back(choice);
  }
  body["usage"] = usage_json(prompt_tokens, completion_tokens);
  return body;
}

json chunk_json(const ResponseHeader& h, int32_t index, const std::string& text, bool first,
                std::optional<FinishReason> finish, const json& logprobs) {
  const bool chat = h.endpoint == Endpoint::ChatCompletions;
  json body = envelope(h, chat ? "chat.completion.chunk" : "text_completion");
  json choice = {{"index", index},
                 {"logprobs", logprobs},
                 {"finish_reason", finish ? json(openai_finish_reason(*finish)) : json(nullptr)}};
  if (chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || !finish) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  body["choices"] = json::array({choice});
  return body;
}

std::string tool_call_id(const chat::ParsedToolCall& call) {
  if (!call.id.empty()) return call.id;
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng(std::random_device{}());
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlphabet[rng() % (sizeof(kAlphabet) - 1)];
  return id;
}

json tool_calls_json(const std::vector<chat::ParsedToolCall>& calls, bool streamed) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json call = {{"id", tool_call_id(calls[i])},
                 {"type", "function"},
                 {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (streamed) call["index"] = i;
    out.push_back(std::move(call));
  }
  return out;
}

json reply_chunk_json(const ResponseHeader& h, int32_t index, json delta, bool first, const char* finish_reason,
                      const json& logprobs) {
  json body = envelope(h, "chat.completion.chunk");
  if (first) delta["role"] = "assistant";
  body["choices"] = json::array({{{"index", index},
                                  {"logprobs", logprobs},
                                  {"finish_reason", finish_reason ? json(finish_reason) : json(nullptr)},
                                  {"delta", std::move(delta)}}});
  return body;
}

json usage_chunk_json(const ResponseHeader& h, int64_t prompt_tokens, int64_t completion_tokens) {
  json body = envelope(h, h.endpoint == Endpoint::ChatCompletions ? "chat.completion.chunk" : "text_completion");
  body["choices"] = json::array();
  body["usage"] = usage_json(prompt_tokens, completion_tokens);
  return body;
}

}  // namespace pagoda::server
