#pragma once
// JSON as every API answer writes it, and a server-sent event that carries it. A token's piece
// may hold part of a UTF-8 character: it is replaced (U+FFFD) rather than refused; chat's
// logprob `bytes` carry such pieces exactly.

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace pagoda::protocol {

// `body` serialised compactly (nlohmann::json or ordered_json).
template <typename Json>
std::string dump_json(const Json& body) {
  return body.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// `data: JSON`, after `event: NAME` when a name is given (Responses' and Anthropic's streams name
// their events; OpenAI's chat and completions streams do not).
template <typename Json>
std::string sse_event(const Json& body, std::string_view name = {}) {
  std::string out;
  if (!name.empty()) out.append("event: ").append(name).append("\n");
  return out + "data: " + dump_json(body) + "\n\n";
}

}  // namespace pagoda::protocol
