#pragma once
// Binding a call's arguments to a built-in's parameters, as Python binds them.

#include <initializer_list>
#include <string_view>
#include <vector>

#include "engine/jinja/value.h"

namespace pagoda::jinja {

// One value per parameter name, positional arguments first, then keywords; a parameter given
// neither way is Undefined. Too many positional arguments or an unknown keyword is an error
// naming `callee`.
std::vector<Value> bind_arguments(std::string_view callee, const Arguments& args,
                                  std::initializer_list<std::string_view> names);

}  // namespace pagoda::jinja
