#pragma once
// String formats of JSON Schema as GBNF, for engine/grammar/json_schema: the characters
// between the quotes of a string with that `format`, written so that every text the grammar
// admits is valid (real calendar dates, leap days only in leap years, RFC 3339 times).

#include <string>
#include <string_view>

namespace pagoda::grammar {

// The GBNF expression for the format's text (no quotes, no escapes needed), or "" for a
// format this does not know.
std::string string_format_gbnf(std::string_view format);

}  // namespace pagoda::grammar
