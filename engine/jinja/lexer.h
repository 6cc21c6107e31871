#pragma once
// Template text to tokens, as jinja2's lexer splits it with trim_blocks and lstrip_blocks on:
// text between tags, {{ }} and {% %} delimiters (comments and {% raw %} markers dropped), and
// the names, literals and operators inside tags. Whitespace control ({%- -%} {%+ +%}) is applied
// to the text here, so the parser sees the text exactly as it will be printed.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::jinja {

enum class TokenType {
  Text,
  VariableBegin,  // {{
  VariableEnd,    // }}
  BlockBegin,     // {%
  BlockEnd,       // %}
  Name,
  String,   // text: the literal's value, escapes decoded
  Integer,  // text: the literal as written (underscores removed)
  Float,
  Operator,  // text: the operator, e.g. "==", "//", "("
  End,
};

struct Token {
  TokenType type;
  std::string text;
  int line;
};

// Throws pagoda::Error naming the line for text jinja2 would refuse to tokenize (an unclosed
// comment, string or tag, an unbalanced bracket, a character no token starts with, text that is
// not UTF-8).
std::vector<Token> tokenize(std::string_view source);

}  // namespace pagoda::jinja
