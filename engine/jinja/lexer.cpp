// The lexer follows jinja2's lexer.py rule for rule (its regular expressions written out as
// scans): newlines normalised to \n and one trailing newline dropped; a tag's "-" strips all
// whitespace on that side, lstrip_blocks strips the spaces before a block or comment tag that
// starts its line, trim_blocks drops the newline right after one.

#include "engine/jinja/lexer.h"

#include <algorithm>
#include <cstring>

#include "engine/jinja/utf8.h"
#include "engine/util/utf8.h"
#include "pagoda/error.h"

namespace pagoda::jinja {

namespace {

[[noreturn]] void fail(int line, const std::string& message) {
  throw Error("template line " + std::to_string(line) + ": " + message);
}

std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Byte length of the Python-whitespace code point at s[i], or 0.
size_t space_at(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return utf8::is_space(c) ? 1 : 0;
  size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
  if (i + n > s.size()) return 0;
  const std::u32string cp = utf8::decode(s.substr(i, n));
  return cp.size() == 1 && utf8::is_space(cp[0]) ? n : 0;
}

size_t skip_spaces(std::string_view s, size_t i) {
  while (i < s.size()) {
    const size_t n = space_at(s, i);
    if (n == 0) break;
    i += n;
  }
  return i;
}

// Python's str.rstrip(): the length of `s` without its trailing whitespace.
size_t rstripped_length(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    if (space_at(s, start) != end - start) break;
    end = start;
  }
  return end;
}

bool all_spaces(std::string_view s) { return !s.empty() && skip_spaces(s, 0) == s.size(); }

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// (\d+_)*\d+ at i: the end, or i when there are no digits.
size_t scan_digits(std::string_view s, size_t i) {
  size_t j = i;
  while (true) {
    size_t k = j;
    while (k < s.size() && is_digit(s[k])) ++k;
    if (k == j) return j == i ? i : j;  // a trailing "_" is not part of the number
    j = k;
    if (j < s.size() && s[j] == '_' && j + 1 < s.size() && is_digit(s[j + 1])) {
      ++j;
    } else {
      return j;
    }
  }
}

// jinja2's float_re at i: the end, or i when no float starts there.
size_t scan_float(std::string_view s, size_t i) {
  if (i > 0 && s[i - 1] == '.') return i;
  const size_t int_end = scan_digits(s, i);
  if (int_end == i) return i;
  size_t j = int_end;
  size_t fraction_end = j;
  if (j < s.size() && s[j] == '.') {
    const size_t f = scan_digits(s, j + 1);
    if (f > j + 1) fraction_end = f;
  }
  // exponent form, with an optional fraction
  size_t e = fraction_end;
  if (e < s.size() && (s[e] == 'e' || s[e] == 'E')) {
    size_t k = e + 1;
    if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
    const size_t exp_end = scan_digits(s, k);
    if (exp_end > k) return exp_end;
  }
  return fraction_end > int_end ? fraction_end : i;
}

// jinja2's integer_re at i (decimal, 0b, 0o, 0x with "_" separators).
size_t scan_integer(std::string_view s, size_t i) {
  if (!is_digit(s[i])) return i;
  auto run = [&](size_t j, auto digit_ok) {
    // (_?[digits])+ starting at j; returns the end or j
    size_t end = j;
    while (true) {
      size_t k = end;
      if (k < s.size() && s[k] == '_') ++k;
      if (k < s.size() && digit_ok(s[k])) {
        end = k + 1;
      } else {
        return end;
      }
    }
  };
  if (s[i] == '0' && i + 1 < s.size()) {
    const char p = static_cast<char>(s[i + 1] | 0x20);
    auto is_bin = [](char c) { return c == '0' || c == '1'; };
    auto is_oct = [](char c) { return c >= '0' && c <= '7'; };
    auto is_hex = [](char c) { return is_digit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f'); };
    size_t end = i;
    if (p == 'b') end = run(i + 2, is_bin);
    if (p == 'o') end = run(i + 2, is_oct);
    if (p == 'x') end = run(i + 2, is_hex);
    if (end > i + 2) return end;
  }
  if (s[i] == '0') return run(i + 1, [](char c) { return c == '0'; });
  return run(i + 1, is_digit);
}

// A quoted literal at s[i] (a quote): the end after the closing quote, or i when unclosed.
size_t scan_string(std::string_view s, size_t i) {
  const char quote = s[i];
  for (size_t j = i + 1; j < s.size(); ++j) {
    if (s[j] == '\\') {
      ++j;
    } else if (s[j] == quote) {
      return j + 1;
    }
  }
  return i;
}

int hex_value(char c) {
  if (is_digit(c)) return c - '0';
  c = static_cast<char>(c | 0x20);
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Python's "unicode-escape" decoding of a literal's body, as jinja2 applies it.
std::string unescape(std::string_view body, int line) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 >= body.size()) {
      out.push_back(body[i]);
      continue;
    }
    const char c = body[++i];
    switch (c) {
      case '\n': break;
      case '\\': out.push_back('\\'); break;
      case '\'': out.push_back('\''); break;
      case '"': out.push_back('"'); break;
      case 'a': out.push_back('\a'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case 'v': out.push_back('\v'); break;
      case 'x':
      case 'u':
      case 'U': {
        const size_t digits = c == 'x' ? 2 : (c == 'u' ? 4 : 8);
        char32_t cp = 0;
        for (size_t k = 0; k < digits; ++k) {
          const int h = i + 1 + k < body.size() ? hex_value(body[i + 1 + k]) : -1;
          if (h < 0) fail(line, std::string("truncated \\") + c + " escape in a string literal");
          cp = cp * 16 + static_cast<char32_t>(h);
        }
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
          fail(line, "invalid code point escape in a string literal");
        append_utf8(cp, out);
        i += digits;
        break;
      }
      default:
        if (c >= '0' && c <= '7') {
          char32_t cp = 0;
          size_t k = 0;
          while (k < 3 && i + k < body.size() && body[i + k] >= '0' && body[i + k] <= '7') {
            cp = cp * 8 + static_cast<char32_t>(body[i + k] - '0');
            ++k;
          }
          append_utf8(cp, out);
          i += k - 1;
        } else {
          out.push_back('\\');  // unknown escapes stay as written
          out.push_back(c);
        }
    }
  }
  return out;
}

constexpr const char* kOperators[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[",
                                      "]",  "(",  ")",  "{",  "}",  ">",  "<", "=", ".", ":", "|", ",", ";"};

class Lexer {
 public:
  explicit Lexer(std::string source) : s_(std::move(source)) {}

  std::vector<Token> run() {
    while (pos_ < s_.size()) root();
    tokens_.push_back({TokenType::End, "", line_});
    return std::move(tokens_);
  }

 private:
  void emit(TokenType type, std::string text, int line) { tokens_.push_back({type, std::move(text), line}); }

  void advance_to(size_t end) {
    line_ += static_cast<int>(std::count(s_.begin() + static_cast<std::ptrdiff_t>(pos_),
                                         s_.begin() + static_cast<std::ptrdiff_t>(end), '\n'));
    pos_ = end;
  }

  // Text up to the next tag, with the tag's whitespace control applied to it.
  void root() {
    size_t tag = pos_;
    while (true) {
      tag = s_.find('{', tag);
      if (tag == std::string::npos || tag + 1 >= s_.size()) {
        emit_text(s_.size(), s_.size());
        return;
      }
      const char kind = s_[tag + 1];
      if (kind == '{' || kind == '%' || kind == '#') break;
      ++tag;
    }
    const char kind = s_[tag + 1];
    const char sign = tag + 2 < s_.size() && (s_[tag + 2] == '-' || s_[tag + 2] == '+') ? s_[tag + 2] : '\0';
    const size_t after = tag + 2 + (sign ? 1 : 0);
    const size_t raw_end = kind == '%' ? match_raw_begin(after) : 0;

    std::string_view text(s_.data() + pos_, tag - pos_);
    size_t keep = text.size();
    if (sign == '-') {
      keep = rstripped_length(text);
    } else if (sign != '+' && kind != '{') {
      const size_t l_pos = text.rfind('\n') + 1;  // npos + 1 == 0
      if ((l_pos > 0 || line_starting_) && all_spaces(text.substr(l_pos))) keep = l_pos;
    }
    emit_text(pos_ + keep, tag);

    if (raw_end) {
      advance_to(raw_end);
      raw_body();
    } else if (kind == '#') {
      advance_to(after);
      comment();
    } else {
      emit(kind == '{' ? TokenType::VariableBegin : TokenType::BlockBegin, "", line_);
      advance_to(after);
      inside_tag(kind == '{');
    }
  }

  // Emits s_[pos_, keep_end) as text and moves past the stripped whitespace up to `end`.
  void emit_text(size_t keep_end, size_t end) {
    if (keep_end > pos_) emit(TokenType::Text, s_.substr(pos_, keep_end - pos_), line_);
    advance_to(end);
    line_starting_ = end > 0 && s_[end - 1] == '\n';
  }

  // Where a block tag ends at i ("+%}", "-%}" and the whitespace after it, or "%}" and, with
  // trim_blocks, one newline), or 0 when none starts there.
  size_t match_block_end(size_t i) const {
    if (s_.compare(i, 3, "+%}") == 0) return i + 3;
    if (s_.compare(i, 3, "-%}") == 0) return skip_spaces(s_, i + 3);
    if (s_.compare(i, 2, "%}") == 0) return i + 2 + (i + 2 < s_.size() && s_[i + 2] == '\n' ? 1 : 0);
    return 0;
  }

  // `\s*raw\s*(-%}\s*|%})` after "{%" and its sign: the end of the raw marker, or 0.
  size_t match_raw_begin(size_t i) const {
    i = skip_spaces(s_, i);
    if (s_.compare(i, 3, "raw") != 0) return 0;
    i = skip_spaces(s_, i + 3);
    if (s_.compare(i, 3, "-%}") == 0) return skip_spaces(s_, i + 3);
    if (s_.compare(i, 2, "%}") == 0) return i + 2;
    return 0;
  }

  // The text of a raw block up to its {% endraw %}, which gets the same whitespace control.
  void raw_body() {
    for (size_t tag = s_.find("{%", pos_); tag != std::string::npos; tag = s_.find("{%", tag + 1)) {
      const char sign = tag + 2 < s_.size() && (s_[tag + 2] == '-' || s_[tag + 2] == '+') ? s_[tag + 2] : '\0';
      size_t i = skip_spaces(s_, tag + 2 + (sign ? 1 : 0));
      if (s_.compare(i, 6, "endraw") != 0) continue;
      const size_t end = match_block_end(skip_spaces(s_, i + 6));
      if (!end) continue;
      std::string_view text(s_.data() + pos_, tag - pos_);
      size_t keep = text.size();
      if (sign == '-') {
        keep = rstripped_length(text);
      } else if (sign != '+') {
        const size_t l_pos = text.rfind('\n') + 1;
        if ((l_pos > 0 || line_starting_) && all_spaces(text.substr(l_pos))) keep = l_pos;
      }
      if (keep) emit(TokenType::Text, std::string(text.substr(0, keep)), line_);
      advance_to(end);
      line_starting_ = s_[end - 1] == '\n';
      return;
    }
    fail(line_, "missing end of raw directive");
  }

  void comment() {
    const int start_line = line_;
    const size_t content = pos_;
    for (size_t close = s_.find("#}", content); close != std::string::npos; close = s_.find("#}", close + 1)) {
      size_t end;
      if (close > content && s_[close - 1] == '+') {
        end = close + 2;
      } else if (close > content && s_[close - 1] == '-') {
        end = skip_spaces(s_, close + 2);
      } else {
        end = close + 2 + (close + 2 < s_.size() && s_[close + 2] == '\n' ? 1 : 0);
      }
      advance_to(end);
      line_starting_ = s_[end - 1] == '\n';
      return;
    }
    fail(start_line, "missing end of comment tag");
  }

  void inside_tag(bool variable) {
    std::vector<char> brackets;
    const int start_line = line_;
    while (pos_ < s_.size()) {
      if (brackets.empty()) {
        size_t end = 0;
        if (variable) {
          if (s_.compare(pos_, 3, "-}}") == 0) end = skip_spaces(s_, pos_ + 3);
          else if (s_.compare(pos_, 2, "}}") == 0) end = pos_ + 2;
        } else {
          end = match_block_end(pos_);
        }
        if (end) {
          emit(variable ? TokenType::VariableEnd : TokenType::BlockEnd, "", line_);
          advance_to(end);
          line_starting_ = s_[end - 1] == '\n';
          return;
        }
      }
      const size_t space_end = skip_spaces(s_, pos_);
      if (space_end > pos_) {
        advance_to(space_end);
        continue;
      }
      const char c = s_[pos_];
      if (size_t end = scan_float(s_, pos_); end > pos_) {
        emit_literal(TokenType::Float, end);
      } else if (end = scan_integer(s_, pos_); end > pos_) {
        emit_literal(TokenType::Integer, end);
      } else if (is_name_start(c)) {
        end = pos_;
        while (end < s_.size() && is_name_char(s_[end])) ++end;
        emit(TokenType::Name, s_.substr(pos_, end - pos_), line_);
        advance_to(end);
      } else if (c == '\'' || c == '"') {
        end = scan_string(s_, pos_);
        if (end == pos_) fail(line_, "unterminated string literal");
        emit(TokenType::String, unescape(std::string_view(s_).substr(pos_ + 1, end - pos_ - 2), line_), line_);
        advance_to(end);
      } else {
        operator_token(brackets);
      }
    }
    fail(start_line, variable ? "unclosed {{ tag" : "unclosed {% tag");
  }

  void emit_literal(TokenType type, size_t end) {
    std::string text = s_.substr(pos_, end - pos_);
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    emit(type, std::move(text), line_);
    advance_to(end);
  }

  void operator_token(std::vector<char>& brackets) {
    for (const char* op : kOperators) {
      const size_t n = std::strlen(op);
      if (s_.compare(pos_, n, op) != 0) continue;
      if (n == 1) {
        const char c = op[0];
        if (c == '(' || c == '[' || c == '{') brackets.push_back(c == '(' ? ')' : (c == '[' ? ']' : '}'));
        if (c == ')' || c == ']' || c == '}') {
          if (brackets.empty()) fail(line_, std::string("unexpected '") + c + "'");
          if (brackets.back() != c)
            fail(line_, std::string("unexpected '") + c + "', expected '" + brackets.back() + "'");
          brackets.pop_back();
        }
      }
      emit(TokenType::Operator, op, line_);
      advance_to(pos_ + n);
      return;
    }
    fail(line_, std::string("unexpected char '") + s_[pos_] + "'");
  }

  std::string s_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) {
  if (!utf8::valid(source)) throw Error("template is not valid UTF-8");
  return Lexer(normalize_newlines(source)).run();
}

}  // namespace pagoda::jinja
