// A recursive-descent reader of the regex that writes GBNF as it goes: character sets
// become alternatives of a raw-character class and the JSON escapes of the characters that
// cannot appear raw.

#include "engine/grammar/json_schema_regex.h"

#include <algorithm>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/grammar/gbnf_text.h"
#include "engine/util/utf8.h"
#include "engine/util/stack_room.h"
#include "pagoda/error.h"

namespace pagoda::grammar {
namespace {

using Ranges = std::vector<std::pair<char32_t, char32_t>>;

constexpr char32_t kMaxCodePoint = 0x10FFFF;

Ranges normalized(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (const auto& x : r) {
    if (!out.empty() && x.first <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, x.second);
    } else {
      out.push_back(x);
    }
  }
  return out;
}

Ranges complement(const Ranges& r) {
  Ranges out;
  char32_t next = 0;
  for (const auto& [lo, hi] : normalized(r)) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  return out;
}

Ranges intersect(const Ranges& a, const Ranges& b) {
  Ranges out;
  for (const auto& [alo, ahi] : a) {
    for (const auto& [blo, bhi] : b) {
      const char32_t lo = std::max(alo, blo), hi = std::min(ahi, bhi);
      if (lo <= hi) out.emplace_back(lo, hi);
    }
  }
  return normalized(out);
}

bool contains(const Ranges& r, char32_t c) {
  return std::any_of(r.begin(), r.end(), [c](const auto& x) { return x.first <= c && c <= x.second; });
}

const Ranges kDigits = {{'0', '9'}};
const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kSpace = {{'\t', '\r'}, {' ', ' '}};
const Ranges kAscii = {{0, 0x7F}};
// What a JSON string may hold unescaped (DEL included), surrogates excluded.
const Ranges kRaw = {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0xD7FF}, {0xE000, kMaxCodePoint}};

std::vector<char32_t> decode_utf8(std::string_view s) {
  std::vector<char32_t> out;
  for (size_t i = 0; i < s.size();) {
    const auto b = uint8_t(s[i]);
    const int n = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
    char32_t c = n == 1 ? b : b & (0x7F >> n);
    for (int k = 1; k < n && i + k < s.size(); ++k) c = (c << 6) | (uint8_t(s[i + k]) & 0x3F);
    out.push_back(c);
    i += size_t(n);
  }
  return out;
}

std::string utf8(char32_t c) {
  std::string s;
  append_utf8(c, s);
  return s;
}

// The JSON text of a set of characters: raw ones in one class, the rest escaped.
std::string json_chars(const Ranges& set) {
  std::vector<std::string> alts;
  const Ranges raw = intersect(set, kRaw);
  if (raw.size() == 1 && raw[0].first == raw[0].second) {
    alts.push_back(gbnf_literal(utf8(raw[0].first)));
  } else if (!raw.empty()) {
    alts.push_back(gbnf_class(raw));
  }
  for (const auto& [c, text] :
       {std::pair<char32_t, const char*>{'"', "\\\""}, {'\\', "\\\\"}, {'\n', "\\n"}, {'\r', "\\r"}, {'\t', "\\t"}}) {
    if (contains(set, c)) alts.push_back(gbnf_literal(text));
  }
  if (alts.empty()) throw Error("a character set with no character a JSON string can hold");
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

// A piece of the grammar and whether it can match no characters (a repetition without an
// upper bound over such a piece would be left-recursive).
struct Expr {
  std::string text;
  bool nullable;
};

class RegexReader {
 public:
  RegexReader(std::string_view pattern, const std::string& any_char, size_t max_count, size_t& budget)
      : p_(decode_utf8(pattern)), any_char_(any_char), max_count_(max_count), budget_(budget) {}

  std::string read() {
    std::vector<std::string> branches;
    while (true) {
      const bool anchored_start = peek('^');
      if (anchored_start) ++i_;
      std::string body = sequence(true).text;
      const bool anchored_end = peek('$');
      if (anchored_end) ++i_;
      if (!anchored_start) body = any_char_ + "* " + body;
      if (!anchored_end) body += " " + any_char_ + "*";
      branches.push_back(body);
      if (!peek('|')) break;
      ++i_;
    }
    if (i_ < p_.size()) fail(p_[i_] == ')' ? "unbalanced ')'" : "'^' or '$' inside the pattern");
    return join(branches);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error("pattern: " + what + " (at character " + std::to_string(i_) + ")");
  }

  bool peek(char32_t c) const { return i_ < p_.size() && p_[i_] == c; }

  static std::string join(const std::vector<std::string>& alts) {
    if (alts.size() == 1) return alts[0];
    std::string out = "(";
    for (size_t k = 0; k < alts.size(); ++k) out += (k ? " | " : "") + alts[k];
    return out + ")";
  }

  Expr alternation() {
    Expr first = sequence(false);
    std::vector<std::string> alts{first.text};
    bool nullable = first.nullable;
    while (peek('|')) {
      ++i_;
      Expr next = sequence(false);
      alts.push_back(next.text);
      nullable = nullable || next.nullable;
    }
    return {join(alts), nullable};
  }

  // Items up to '|', ')' or the end; at the top level also up to a final '$'.
  Expr sequence(bool top) {
    std::string out;
    bool nullable = true;
    while (i_ < p_.size() && !peek('|') && !peek(')')) {
      if (top && peek('$') && (i_ + 1 == p_.size() || p_[i_ + 1] == '|')) break;
      const Expr item = quantified(atom());
      out += (out.empty() ? "" : " ") + item.text;
      nullable = nullable && item.nullable;
    }
    return {out.empty() ? "\"\"" : "(" + out + ")", nullable};
  }

  // The recursion (alternation -> sequence -> atom -> group) keeps its frames small: groups
  // and the other atoms are read by functions of their own, not inlined, so their locals are
  // not on the stack once per nesting level (under AddressSanitizer each gets its own slot).
  Expr atom() { return peek('(') ? group() : leaf(); }

  [[gnu::noinline]] Expr group() {
    ++i_;
    if (peek('?')) {
      if (i_ + 1 < p_.size() && p_[i_ + 1] == ':') {
        i_ += 2;
      } else {
        fail("lookaround and named groups are not supported");
      }
    }
    if (++groups_open_ > kRegexMaxNesting)
      fail("groups nested deeper than " + std::to_string(kRegexMaxNesting) + " levels");
    if (stack_nearly_full()) fail("groups nested too deeply for this thread's stack");
    Expr inner = alternation();
    if (!peek(')')) fail("unterminated group");
    ++i_;
    --groups_open_;
    return inner;
  }

  [[gnu::noinline]] Expr leaf() {
    const char32_t c = p_[i_++];
    switch (c) {
      case '[': return {json_chars(char_class()), false};
      case '.': return {json_chars(complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}})), false};
      case '\\': return {json_chars(escape(false)), false};
      case '^':
      case '$': fail("'^' or '$' inside the pattern");
      case '*':
      case '+':
      case '?':
      case '{': fail("quantifier with nothing before it");
      case ']':
      case '}': fail("unescaped '" + std::string(1, char(c)) + "'");
      default: return {json_chars({{c, c}}), false};
    }
  }

  // After '\': the characters it stands for. Negated shorthands are ASCII-only (see header).
  Ranges escape(bool in_class) {
    if (i_ >= p_.size()) fail("pattern ends with '\\'");
    const char32_t c = p_[i_++];
    switch (c) {
      case 'd': return kDigits;
      case 'w': return kWord;
      case 's': return kSpace;
      case 'D': return intersect(complement(kDigits), kAscii);
      case 'W': return intersect(complement(kWord), kAscii);
      case 'S': return intersect(complement(kSpace), kAscii);
      case 'n': return {{'\n', '\n'}};
      case 'r': return {{'\r', '\r'}};
      case 't': return {{'\t', '\t'}};
      case 'f': return {{'\f', '\f'}};
      case 'v': return {{'\v', '\v'}};
      case '0': return {{0, 0}};
      case 'x': {
        const char32_t v = hex(2);
        return {{v, v}};
      }
      case 'u': {
        const char32_t v = hex(4);
        return {{v, v}};
      }
      case 'b':
        if (in_class) return {{'\b', '\b'}};
        fail("word boundaries (\\b) are not supported");
      default:
        if (c < 0x80 && !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return {{c, c}};
        fail("unsupported escape '\\" + utf8(c) + "'");
    }
  }

  char32_t hex(int digits) {
    char32_t v = 0;
    for (int k = 0; k < digits; ++k) {
      if (i_ >= p_.size()) fail("truncated hex escape");
      const char32_t c = p_[i_++];
      const int d = c >= '0' && c <= '9'   ? int(c - '0')
                    : c >= 'a' && c <= 'f' ? int(c - 'a' + 10)
                    : c >= 'A' && c <= 'F' ? int(c - 'A' + 10)
                                           : -1;
      if (d < 0) fail("bad hex escape");
      v = (v << 4) | char32_t(d);
    }
    return v;
  }

  // After '[': the set, complemented for [^...].
  Ranges char_class() {
    const bool negated = peek('^');
    if (negated) ++i_;
    Ranges set;
    bool shorthand = false;
    bool first = true;
    while (true) {
      if (i_ >= p_.size()) fail("unterminated character class");
      if (peek(']') && !first) break;
      first = false;
      Ranges item = class_item(shorthand);
      if (peek('-') && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
        ++i_;
        Ranges end = class_item(shorthand);
        if (item.size() != 1 || end.size() != 1 || item[0].first != item[0].second || end[0].first != end[0].second) {
          fail("a class range between sets");
        }
        if (end[0].first < item[0].first) fail("class range out of order");
        item = {{item[0].first, end[0].first}};
      }
      set.insert(set.end(), item.begin(), item.end());
    }
    ++i_;
    if (!negated) return normalized(set);
    // A negated \d, \w or \s differs between ECMA and Python beyond ASCII.
    return shorthand ? intersect(complement(set), kAscii) : complement(set);
  }

  Ranges class_item(bool& shorthand) {
    const char32_t c = p_[i_++];
    if (c != '\\') return {{c, c}};
    if (i_ < p_.size() && std::u32string_view(U"dDwWsS").find(p_[i_]) != std::u32string_view::npos) shorthand = true;
    return escape(true);
  }

  [[gnu::noinline]] Expr quantified(Expr item) {
    if (i_ >= p_.size()) return item;
    size_t min = 0, max = kUnbounded;
    const char32_t c = p_[i_];
    if (c == '*') {
      ++i_;
    } else if (c == '+') {
      ++i_, min = 1;
    } else if (c == '?') {
      ++i_, max = 1;
    } else if (c == '{') {
      ++i_;
      min = max = count();
      if (peek(',')) {
        ++i_;
        max = peek('}') ? kUnbounded : count();
      }
      if (!peek('}')) fail("unterminated {m,n}");
      ++i_;
      if (max != kUnbounded && min > max) fail("{m,n} with m > n");
    } else {
      return item;
    }
    if (peek('?')) ++i_;  // lazy: the same language
    if (peek('*') || peek('+') || peek('{') || peek('?')) fail("a quantifier after a quantifier");
    if (max == kUnbounded && item.nullable) fail("an unbounded repetition of something that can be empty");
    const size_t cost = max == kUnbounded ? min + 1 : max;
    if (cost > budget_) throw Error("pattern: repetitions too large in all");
    budget_ -= cost;
    if (max == 0) return {"\"\"", true};
    return {gbnf_repeat(item.text, min, max), item.nullable || min == 0};
  }

  size_t count() {
    if (i_ >= p_.size() || p_[i_] < '0' || p_[i_] > '9') fail("expecting a number in {m,n}");
    size_t n = 0;
    while (i_ < p_.size() && p_[i_] >= '0' && p_[i_] <= '9') {
      n = n * 10 + size_t(p_[i_++] - '0');
      if (n > max_count_) fail("repetition count above " + std::to_string(max_count_));
    }
    return n;
  }

  std::vector<char32_t> p_;
  size_t i_ = 0;
  size_t groups_open_ = 0;  // around the character being read
  const std::string& any_char_;
  size_t max_count_;
  size_t& budget_;
};

}  // namespace

std::string regex_to_gbnf(std::string_view pattern, const std::string& any_char, size_t max_count, size_t& budget) {
  return RegexReader(pattern, any_char, max_count, budget).read();
}

}  // namespace pagoda::grammar
