#include "engine/jinja/arguments.h"

#include <string>

#include "pagoda/error.h"

namespace pagoda::jinja {

std::vector<Value> bind_arguments(std::string_view callee, const Arguments& args,
                                  std::initializer_list<std::string_view> names) {
  std::vector<Value> bound(names.size());
  if (args.positional.size() > names.size()) {
    throw Error(std::string(callee) + "() takes at most " + std::to_string(names.size()) + " arguments (" +
                std::to_string(args.positional.size()) + " given)");
  }
  for (size_t i = 0; i < args.positional.size(); ++i) bound[i] = args.positional[i];
  for (const auto& [key, value] : args.keyword) {
    size_t i = 0;
    for (std::string_view name : names) {
      if (name == key) break;
      ++i;
    }
    if (i == names.size()) throw Error(std::string(callee) + "() got an unexpected keyword argument '" + key + "'");
    if (i < args.positional.size())
      throw Error(std::string(callee) + "() got multiple values for argument '" + key + "'");
    bound[i] = value;
  }
  return bound;
}

}  // namespace pagoda::jinja
