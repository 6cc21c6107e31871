#pragma once
// jinja2's built-in filters and tests, plus transformers' tojson, with jinja2's argument names
// and defaults. The renderer checks names at load (has_filter/has_test), as jinja2 does when it
// compiles a template.

#include <string>

#include "engine/jinja/budget.h"
#include "engine/jinja/value.h"

namespace pagoda::jinja {

bool has_filter(const std::string& name);
bool has_test(const std::string& name);

Value apply_filter(const std::string& name, const Value& input, const Arguments& args, Budget& budget);
bool apply_test(const std::string& name, const Value& input, const Arguments& args, Budget& budget);

using FilterFn = Value (*)(const Value& input, const Arguments& args, Budget& budget);
// The filters of each group, by name (filters.cpp, sequence_filters.cpp).
void add_text_filters(void (*add)(const char* name, FilterFn f));
void add_sequence_filters(void (*add)(const char* name, FilterFn f));

// The value at `attribute` of `item`: a dotted path, digits as list indices, as jinja2's
// make_attrgetter reads it.
Value get_path(const Value& item, const std::string& attribute, Budget& budget);

}  // namespace pagoda::jinja
