#pragma once
// The functions a chat template can call by name: jinja2's range (capped as the sandbox caps
// it), dict and namespace, and transformers' raise_exception and strftime_now.

#include "engine/jinja/value.h"

namespace pagoda::jinja {

// Adds range, dict, namespace, raise_exception and strftime_now to `globals`.
void add_globals(Dict& globals);

}  // namespace pagoda::jinja
