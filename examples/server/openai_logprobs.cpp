#include "examples/server/openai_logprobs.h"

#include <algorithm>
#include <string>
#include <vector>

namespace pagoda::server {

using nlohmann::json;

namespace {

json bytes_of(const std::string& text) {
  json out = json::array();
  for (unsigned char c : text) out.push_back(int(c));
  return out;
}

}  // namespace

json chat_logprob_json(const Engine& engine, int32_t token, const TokenLogprobs& lp) {
  const std::string text = engine.token_text(token);
  json top = json::array();
  for (const TokenLogprob& t : lp.top) {
    const std::string piece = engine.token_text(t.token);
    top.push_back({{"token", piece}, {"logprob", t.logprob}, {"bytes", bytes_of(piece)}});
  }
  return {{"token", text}, {"logprob", lp.logprob}, {"bytes", bytes_of(text)}, {"top_logprobs", top}};
}

json logprobs_json(Endpoint endpoint, const Engine& engine, std::span<const int32_t> tokens,
                   std::span<const TokenLogprobs> logprobs, size_t text_offset) {
  const size_t n = std::min(tokens.size(), logprobs.size());
  if (endpoint == Endpoint::ChatCompletions) {
    json content = json::array();
    for (size_t i = 0; i < n; ++i) content.push_back(chat_logprob_json(engine, tokens[i], logprobs[i]));
    return {{"content", content}};
  }
  json texts = json::array(), values = json::array(), tops = json::array(), offsets = json::array();
  for (size_t i = 0; i < n; ++i) {
    const std::string text = engine.token_text(tokens[i]);
    texts.push_back(text);
    values.push_back(logprobs[i].logprob);
    json top = json::object();
    for (const TokenLogprob& t : logprobs[i].top) top[engine.token_text(t.token)] = t.logprob;
    tops.push_back(top);
    offsets.push_back(text_offset);
    text_offset += text.size();
  }
  return {{"tokens", texts}, {"token_logprobs", values}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json echo_logprobs_json(const Engine& engine, std::span<const int32_t> prompt,
                        std::span<const TokenLogprobs> prompt_logprobs, std::span<const int32_t> tokens,
                        std::span<const TokenLogprobs> logprobs) {
  if (prompt.empty()) return logprobs_json(Endpoint::Completions, engine, tokens, logprobs);
  // The first prompt token as an entry of its own, then each later one with its logprobs.
  const TokenLogprobs none;
  json out = logprobs_json(Endpoint::Completions, engine, prompt.first(1), std::span(&none, 1));
  out["token_logprobs"][0] = nullptr;
  out["top_logprobs"][0] = nullptr;
  size_t offset = engine.token_text(prompt[0]).size();
  auto append = [&](const json& part) {
    for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"}) {
      for (const json& v : part[key]) out[key].push_back(v);
    }
    for (const json& t : part["tokens"]) offset += t.get<std::string>().size();
  };
  append(logprobs_json(Endpoint::Completions, engine, prompt.subspan(1), prompt_logprobs, offset));
  append(logprobs_json(Endpoint::Completions, engine, tokens, logprobs, offset));
  return out;
}

bool is_ending_token(const Engine& engine, const Request& request, int32_t token) {
  if (std::find(request.stop_token_ids.begin(), request.stop_token_ids.end(), token) != request.stop_token_ids.end()) {
    return true;
  }
  const std::vector<int32_t> eog = engine.eog_ids();
  return !request.ignore_eos && std::binary_search(eog.begin(), eog.end(), token);
}

}  // namespace pagoda::server
