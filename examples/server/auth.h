#pragma once
// The --api-key (and --metrics-key) check: "Authorization: Bearer KEY" as OpenAI's clients
// send it, or "x-api-key: KEY" as Anthropic's do, compared in constant time so the answer's
// timing tells nothing about how much of a guess was right.

#include <string>
#include <string_view>

namespace pagoda::server {

// Whether the Authorization header's value carries `key` as its bearer token. An empty key
// lets everything through (no --api-key).
bool bearer_token_matches(std::string_view authorization, const std::string& key);

// Whether a request with these header values carries `key`: the x-api-key header when it is
// there, else the bearer token. An empty key lets everything through.
bool api_key_matches(std::string_view authorization, std::string_view x_api_key, const std::string& key);

}  // namespace pagoda::server
