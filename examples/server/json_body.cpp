#include "examples/server/json_body.h"

#include <atomic>
#include <string>

#include "engine/util/json_depth.h"
#include "examples/server/api_error.h"
#include "pagoda/error.h"

namespace pagoda::server {

namespace {

std::atomic<int> g_max_depth{kDefaultMaxJsonDepth};

}  // namespace

void set_max_json_depth(int depth) { g_max_depth.store(depth); }

int max_json_depth() { return g_max_depth.load(); }

nlohmann::ordered_json parse_json_body(std::string_view text, int max_depth) {
  try {
    return parse_ordered_json_bounded(text, "the JSON body", true, size_t(max_depth));
  } catch (const Error&) {  // the bound's refusal; invalid JSON is nlohmann's parse_error
    throw ApiError(400,
                   "the JSON body is nested deeper than --max-json-depth (" + std::to_string(max_depth) + " levels)");
  }
}

nlohmann::ordered_json parse_request_body(std::string_view text) {
  try {
    return parse_json_body(text);
  } catch (const nlohmann::json::exception& e) {
    throw bad_request(std::string("the body is not valid JSON: ") + e.what());
  }
}

}  // namespace pagoda::server
