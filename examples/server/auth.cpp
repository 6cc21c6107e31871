#include "examples/server/auth.h"

#include <cstddef>
#include <string_view>

namespace pagoda::server {

namespace {

// Looks at every byte of the key whatever the token, and folds the length difference in.
bool equal_constant_time(std::string_view token, std::string_view key) {
  unsigned char diff = token.size() == key.size() ? 0 : 1;
  for (size_t i = 0; i < key.size(); ++i) {
    const unsigned char t = i < token.size() ? static_cast<unsigned char>(token[i]) : 0;
    diff |= static_cast<unsigned char>(t ^ static_cast<unsigned char>(key[i]));
  }
  return diff == 0;
}

}  // namespace

bool bearer_token_matches(std::string_view authorization, const std::string& key) {
  if (key.empty()) return true;
  constexpr std::string_view kScheme = "Bearer ";
  std::string_view value = authorization;
  if (value.size() < kScheme.size()) return equal_constant_time("", key);
  // The scheme is case-insensitive (RFC 7235).
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if ((value[i] | 0x20) != (kScheme[i] | 0x20)) return equal_constant_time("", key);
  }
  value.remove_prefix(kScheme.size());
  return equal_constant_time(value, key);
}

bool api_key_matches(std::string_view authorization, std::string_view x_api_key, const std::string& key) {
  if (key.empty()) return true;
  if (!x_api_key.empty()) return equal_constant_time(x_api_key, key);
  return bearer_token_matches(authorization, key);
}

}  // namespace pagoda::server
