#pragma once
// Writing GBNF text: literals, character classes and bounded repetitions, escaped so that
// engine/grammar/gbnf_parser reads back exactly the code points meant.

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pagoda::grammar {

// A quoted literal matching the UTF-8 text exactly (quotes, backslashes and control
// characters escaped; other characters written as they are).
std::string gbnf_literal(std::string_view utf8);

// A class `[...]` (or `[^...]`) of the inclusive code point ranges.
std::string gbnf_class(const std::vector<std::pair<char32_t, char32_t>>& ranges, bool negated = false);

// `item` repeated min..max times (max == kUnbounded: no upper bound); `item` must be one
// term (a name, literal, class or parenthesized group). Empty text for max == 0.
inline constexpr size_t kUnbounded = size_t(-1);
std::string gbnf_repeat(const std::string& item, size_t min, size_t max);

}  // namespace pagoda::grammar
