#pragma once
// Tokens to the statement tree, with jinja2's grammar and operator precedence: conditional
// expressions, or/and/not, comparisons (chained), + -, ~, * / // %, **, unary minus, then the
// postfix forms (attribute, subscript, slice, call) and filters and tests.

#include <string_view>

#include "engine/jinja/ast.h"

namespace pagoda::jinja {

// Throws pagoda::Error "template line N: ..." for a syntax error, for a tag jinja2 has but
// pagoda does not (extends, include, import, recursive loops), and for expressions nested
// deeper than a few hundred levels.
Body parse(std::string_view source);

}  // namespace pagoda::jinja
