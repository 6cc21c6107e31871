#pragma once
// The --api-key check: "Authorization: Bearer KEY", compared in constant time so the answer's
// timing tells nothing about how much of a guess was right.

#include <string>

namespace pagoda::server {

// Whether the Authorization header's value carries `key` as its bearer token. An empty key
// lets everything through (no --api-key).
bool bearer_token_matches(const std::string& authorization, const std::string& key);

}  // namespace pagoda::server
