#pragma once
// Attribute and item access the way jinja2's sandbox resolves them: `obj.name` looks for a
// method of the Python object first and then for an item; `obj[key]` the other way round. The
// methods are those of str, dict and list that templates call; the ones that would modify a
// list or dict are refused, as ImmutableSandboxedEnvironment refuses them.

#include <string>

#include "engine/jinja/budget.h"
#include "engine/jinja/value.h"

namespace pagoda::jinja {

// Undefined when there is no such attribute or item (an error for an Undefined `obj`).
Value get_attribute(const Value& obj, const std::string& name, Budget& budget);
Value get_item(const Value& obj, const Value& key, Budget& budget);

}  // namespace pagoda::jinja
