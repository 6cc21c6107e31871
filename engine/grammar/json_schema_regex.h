#pragma once
// A JSON Schema `pattern` (an ECMA 262 regular expression, searched for anywhere in the
// string) as a GBNF expression over the characters between a JSON string's quotes, for
// engine/grammar/json_schema.
//
// The subset: literal characters and escapes (\n \t \r \f \v \0 \xHH \uHHHH and escaped
// punctuation), classes [...] and [^...] with ranges, `.`, \d \w \s and their negations,
// groups ( ) and (?: ), alternation |, quantifiers ? * + {m} {m,} {m,n} (a lazy `?` after
// them changes nothing here), and ^ / $ at the start / end of a top-level alternative; a
// branch without them may have any text before / after its match. Anything else (lookaround,
// backreferences, \b, named groups, anchors inside groups) is refused with pagoda::Error, and
// so are groups nested deeper than kRegexMaxNesting, or than the thread's stack has room for:
// the reader recurses once per group, and each group nests the GBNF up to two levels (within
// the GBNF parser's kGbnfMaxNesting).
//
// The grammar writes a subset of what the pattern matches, safe for both ECMA and Python's
// `re`: `.` excludes all line terminators, \d \w \s are ASCII, a negated class that involves
// them admits only ASCII, and control characters other than \n \r \t are not written.
// Characters that JSON must escape are written escaped (\" \\ \n ...).

#include <cstddef>
#include <string>
#include <string_view>

namespace pagoda::grammar {

inline constexpr size_t kRegexMaxNesting = 32;

// `any_char` is the rule name for one JSON string character (used around unanchored
// branches). Each repetition's bound (its minimum when unbounded) is taken from `budget`;
// running out, or a bound above `max_count`, is an error.
std::string regex_to_gbnf(std::string_view pattern, const std::string& any_char, size_t max_count, size_t& budget);

}  // namespace pagoda::grammar
