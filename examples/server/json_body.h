#pragma once
// Every JSON request body is parsed here, with a bound on its nesting: a body nested deeper
// than --max-json-depth is refused with a 400 naming the limit before any consumer walks it
// (the recursive code downstream, schema and template conversion among it, would run out of
// stack on 100,000 levels).

#include <string_view>

#include <nlohmann/json.hpp>

namespace pagoda::server {

inline constexpr int kDefaultMaxJsonDepth = 128;

// The process's limit, set once from --max-json-depth at start.
void set_max_json_depth(int depth);
int max_json_depth();

// `text` parsed; ApiError 400 when it is nested deeper than `max_depth` (objects and arrays
// both count; a top-level object is depth 1). Invalid JSON throws nlohmann's parse_error, as
// json::parse does, so the callers' messages stay as they were. Objects keep the order their
// members were sent in: a schema's properties are written, and tools shown to the model, in it.
nlohmann::ordered_json parse_json_body(std::string_view text, int max_depth = max_json_depth());

// A request's body through parse_json_body, invalid JSON answered with a 400 that says so.
nlohmann::ordered_json parse_request_body(std::string_view text);

}  // namespace pagoda::server
