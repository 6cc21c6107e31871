// The parser callback sees each container open with the number of containers around it, so
// the limit holds before anything deeper is built.

#include "engine/util/json_depth.h"

#include <string>
#include <utility>
#include <vector>

#include "pagoda/error.h"

namespace pagoda {
namespace {

template <class Json>
Json parse_bounded(std::string_view text, std::string_view what, bool allow_exceptions, size_t max_depth) {
  const typename Json::parser_callback_t bound = [&](int depth, typename Json::parse_event_t event, Json&) {
    const bool opens = event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start;
    if (opens && size_t(depth) >= max_depth) throw Error(json_depth_error(what, max_depth));
    return true;
  };
  return Json::parse(text.begin(), text.end(), bound, allow_exceptions);
}

template <class Json>
void check_bounded(const Json& value, std::string_view what, size_t max_depth) {
  std::vector<std::pair<const Json*, size_t>> pending{{&value, 0}};  // a value, the containers around it
  while (!pending.empty()) {
    const auto [v, around] = pending.back();
    pending.pop_back();
    if (!v->is_structured()) continue;
    if (around >= max_depth) throw Error(json_depth_error(what, max_depth));
    for (const Json& child : *v) pending.emplace_back(&child, around + 1);
  }
}

}  // namespace

std::string json_depth_error(std::string_view what, size_t max_depth) {
  return std::string(what) + ": JSON nested deeper than " + std::to_string(max_depth) + " levels";
}

nlohmann::json parse_json_bounded(std::string_view text, std::string_view what, bool allow_exceptions,
                                  size_t max_depth) {
  return parse_bounded<nlohmann::json>(text, what, allow_exceptions, max_depth);
}

nlohmann::ordered_json parse_ordered_json_bounded(std::string_view text, std::string_view what, bool allow_exceptions,
                                                  size_t max_depth) {
  return parse_bounded<nlohmann::ordered_json>(text, what, allow_exceptions, max_depth);
}

void check_json_depth(const nlohmann::json& value, std::string_view what, size_t max_depth) {
  check_bounded(value, what, max_depth);
}

void check_json_depth(const nlohmann::ordered_json& value, std::string_view what, size_t max_depth) {
  check_bounded(value, what, max_depth);
}

}  // namespace pagoda
