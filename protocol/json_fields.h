#pragma once
// Reading a request body field by field, as every API's parser does: a field that is absent or
// null is not there, and an error quotes the field's path ('messages[2].content').

#include <string>

#include <nlohmann/json.hpp>

#include "pagoda/error.h"

namespace pagoda::protocol {

// `object[name]`, or nullptr when it is absent or null.
inline const nlohmann::ordered_json* field(const nlohmann::ordered_json& object, const char* name) {
  auto it = object.find(name);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

inline std::string quoted(const std::string& path) { return "'" + path + "'"; }

// `object[name]` as a string; pagoda::Error naming `path.name` when it is missing or not one.
inline std::string string_field(const nlohmann::ordered_json& object, const char* name, const std::string& path) {
  const nlohmann::ordered_json* v = field(object, name);
  if (!v || !v->is_string()) throw Error(quoted(path + "." + name) + " must be a string");
  return v->get<std::string>();
}

}  // namespace pagoda::protocol
