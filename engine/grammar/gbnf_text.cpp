// GBNF escapes: the parser takes \n \r \t \\ \" \[ \] \- and \xHH, \uHHHH, \UHHHHHHHH; other
// characters, UTF-8 included, stand for themselves.

#include "engine/grammar/gbnf_text.h"

#include <cstdio>

#include "engine/util/utf8.h"

namespace pagoda::grammar {
namespace {

// One code point inside a literal or class; `special` are the ASCII characters that need a
// backslash there.
void append_escaped(std::string& out, char32_t c, std::string_view special) {
  if (c == '\n') {
    out += "\\n";
  } else if (c == '\r') {
    out += "\\r";
  } else if (c == '\t') {
    out += "\\t";
  } else if (c < 0x20 || c == 0x7F || (c >= 0xD800 && c <= 0xDFFF)) {
    char buf[12];
    std::snprintf(buf, sizeof buf, c < 0x100 ? "\\x%02X" : "\\u%04X", unsigned(c));
    out += buf;
  } else if (c < 0x80 && special.find(char(c)) != std::string_view::npos) {
    out += '\\';
    out += char(c);
  } else {
    append_utf8(c, out);
  }
}

}  // namespace

std::string gbnf_literal(std::string_view utf8) {
  std::string out = "\"";
  for (const char c : utf8) {
    const auto byte = uint8_t(c);
    if (byte >= 0x80) {
      out += c;  // part of a multi-byte character: copied as is
    } else {
      append_escaped(out, byte, "\"\\");
    }
  }
  return out + "\"";
}

std::string gbnf_class(const std::vector<std::pair<char32_t, char32_t>>& ranges, bool negated) {
  std::string out = negated ? "[^" : "[";
  for (const auto& [lo, hi] : ranges) {
    // '^' is special only first; written as \x5E anywhere for simplicity.
    if (lo == '^') {
      out += "\\x5E";
    } else {
      append_escaped(out, lo, "\"\\[]-");
    }
    if (hi != lo) {
      out += '-';
      if (hi == '^') {
        out += "\\x5E";
      } else {
        append_escaped(out, hi, "\"\\[]-");
      }
    }
  }
  return out + "]";
}

std::string gbnf_repeat(const std::string& item, size_t min, size_t max) {
  if (max == 0) return "";
  if (max == kUnbounded) {
    if (min == 0) return item + "*";
    if (min == 1) return item + "+";
    return item + "{" + std::to_string(min) + ",}";
  }
  if (min == 1 && max == 1) return item;
  if (min == 0 && max == 1) return item + "?";
  if (min == max) return item + "{" + std::to_string(min) + "}";
  return item + "{" + std::to_string(min) + "," + std::to_string(max) + "}";
}

}  // namespace pagoda::grammar
