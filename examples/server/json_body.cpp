#include "examples/server/json_body.h"

#include <atomic>
#include <string>

#include "examples/server/api_error.h"

namespace pagoda::server {

namespace {

std::atomic<int> g_max_depth{kDefaultMaxJsonDepth};

}  // namespace

void set_max_json_depth(int depth) { g_max_depth.store(depth); }

int max_json_depth() { return g_max_depth.load(); }

nlohmann::json parse_json_body(std::string_view text, int max_depth) {
  // nlohmann's parser is iterative; the callback sees each container open at the depth of the
  // container it opens in, so the refusal comes at the first level too deep, before the rest
  // of the text is read.
  const nlohmann::json::parser_callback_t bound = [max_depth](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) {
    if ((event == nlohmann::json::parse_event_t::object_start || event == nlohmann::json::parse_event_t::array_start) &&
        depth >= max_depth) {
      throw ApiError(400, "the JSON body is nested deeper than --max-json-depth (" + std::to_string(max_depth) + " levels)");
    }
    return true;
  };
  return nlohmann::json::parse(text, bound);
}

}  // namespace pagoda::server
