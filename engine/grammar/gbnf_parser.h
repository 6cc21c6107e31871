#pragma once
// llama.cpp's GBNF grammar format (grammars/README.md there), so existing grammars work:
//
//   root  ::= "{" ws pair ("," ws pair)* "}"    # the start rule is `root`
//   pair  ::= [a-z]+ ":" ws [^,}]*
//   ws    ::= [ \t\n]*
//
// Rules `name ::= alternatives` (names of letters, digits and '-'); alternatives `|`;
// sequences; groups `( )`; repetitions `*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}` on the item
// before them; string literals and character classes `[a-z]`, `[^...]` with the escapes
// \n \r \t \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH; `.` for any character; `#` comments. A
// newline ends a rule, except inside a group or after `|` or `::=`.
//
// Groups and repetitions become helper rules, as llama.cpp rewrites them: `x*` is
// `h ::= x h |`, `x+` is `x x*`, `x?` is `h ::= x |`, and `x{m,n}` is m copies of x followed
// by n - m nested optional helpers (`h1 ::= x h2 |`), which keeps the expansion unambiguous.
//
// Refused with pagoda::Error naming line:column: syntax errors, unterminated strings, classes
// and groups, bad escapes, a reference to an undefined rule, a rule defined twice, no `root`,
// groups nested deeper than kGbnfMaxNesting or than the thread's stack has room for (the
// reader recurses once per group, and the text may come from a request), repetition bounds with m > n or above 1000,
// grammars of more than 2^18 elements after the rewriting, and left recursion (a rule that can reach itself before
// reading a character, including a `*` or `+` over an item that can be empty), which a
// stack-based matcher would expand forever.

#include <cstddef>
#include <string_view>

#include "engine/grammar/grammar.h"

namespace pagoda::grammar {

inline constexpr size_t kGbnfMaxNesting = 128;

Grammar parse_gbnf(std::string_view text);

}  // namespace pagoda::grammar
