#pragma once
// Bounded nesting for JSON that came from a user (request bodies, schemas, tools, template
// kwargs, a model's tool-call replies). nlohmann's parser is iterative, but dump(), copies,
// comparisons and every walk of ours over a parsed value recurse once per level: a document
// nested 100,000 deep would overflow the stack there. Parsing through parse_json_bounded, or
// checking an already-parsed value with check_json_depth, keeps every later recursion within
// kMaxJsonDepth levels.
//
// Depth counts containers: a scalar is 0 deep, `[]` and `{}` 1, `[{}]` 2.

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace pagoda {

inline constexpr size_t kMaxJsonDepth = 128;

// The JSON value of `text`. Throws pagoda::Error "<what>: JSON nested deeper than N levels"
// (N = max_depth) as soon as the parser opens a container past the limit. A syntax error
// throws nlohmann's parse_error, or with !allow_exceptions gives a discarded value, as
// nlohmann::json::parse does.
nlohmann::json parse_json_bounded(std::string_view text, std::string_view what, bool allow_exceptions = true,
                                  size_t max_depth = kMaxJsonDepth);
nlohmann::ordered_json parse_ordered_json_bounded(std::string_view text, std::string_view what,
                                                  bool allow_exceptions = true, size_t max_depth = kMaxJsonDepth);

// The same limit for a value parsed elsewhere, walked iteratively; throws the same Error.
void check_json_depth(const nlohmann::json& value, std::string_view what, size_t max_depth = kMaxJsonDepth);
void check_json_depth(const nlohmann::ordered_json& value, std::string_view what, size_t max_depth = kMaxJsonDepth);

// The message of the Error above, for code that bounds depth over other structures (Python
// objects) and should read the same.
std::string json_depth_error(std::string_view what, size_t max_depth = kMaxJsonDepth);

}  // namespace pagoda
