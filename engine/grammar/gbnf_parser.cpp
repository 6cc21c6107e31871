// A recursive-descent reader of GBNF text into the flat Grammar, then the checks a
// stack-based matcher needs (every rule defined, a root, no left recursion).

#include "engine/grammar/gbnf_parser.h"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "engine/util/stack_room.h"
#include "pagoda/error.h"

namespace pagoda::grammar {
namespace {

constexpr uint32_t kMaxRepetition = 1000;
constexpr size_t kMaxElements = size_t(1) << 18;
constexpr size_t kNowhere = std::string_view::npos;

using Sequence = std::vector<Element>;

struct DraftRule {
  std::vector<Sequence> alternatives;
  size_t defined_at = kNowhere;  // text offset of the definition (the group, for a helper)
  size_t first_use = kNowhere;   // text offset of the first reference
};

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Sorts and merges ranges so CharClass::matches can stop early and matches_any_of is exact.
void normalize(CharClass& c) {
  std::sort(c.ranges.begin(), c.ranges.end());
  std::vector<std::pair<char32_t, char32_t>> merged;
  for (const auto& r : c.ranges) {
    if (!merged.empty() && r.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  c.ranges = std::move(merged);
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Grammar parse() {
    skip_space(true);
    while (pos_ < text_.size()) {
      parse_rule();
      skip_space(true);
    }
    for (size_t r = 0; r < rules_.size(); ++r) {
      if (rules_[r].defined_at == kNowhere) fail(rules_[r].first_use, "undefined rule '" + names_[r] + "'");
    }
    const auto root = ids_.find("root");
    if (root == ids_.end() || rules_[root->second].defined_at == kNowhere) {
      fail(text_.size(), "no 'root' rule (the start rule)");
    }
    refuse_left_recursion();
    return flatten(root->second);
  }

 private:
  [[noreturn]] void fail(size_t at, const std::string& what) const {
    at = std::min(at, text_.size());
    size_t line = 1, column = 1;
    for (size_t i = 0; i < at; ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    throw Error("grammar: " + std::to_string(line) + ":" + std::to_string(column) + ": " + what);
  }

  bool at_end() const { return pos_ >= text_.size(); }

  // Spaces, tabs and comments; newlines only where the rule cannot end there.
  void skip_space(bool newline_ok) {
    while (!at_end()) {
      const char c = text_[pos_];
      if (c == '#') {
        while (!at_end() && text_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || ((c == '\n' || c == '\r') && newline_ok)) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (!at_end() && is_name_char(text_[pos_])) ++pos_;
    if (pos_ == start) fail(start, "expecting a rule name");
    return std::string(text_.substr(start, pos_ - start));
  }

  uint32_t symbol(const std::string& name, size_t used_at) {
    const auto [it, inserted] = ids_.try_emplace(name, uint32_t(rules_.size()));
    if (inserted) {
      names_.push_back(name);
      rules_.emplace_back();
    }
    if (rules_[it->second].first_use == kNowhere) rules_[it->second].first_use = used_at;
    return it->second;
  }

  uint32_t add_helper(const std::string& parent, size_t at, std::vector<Sequence> alternatives) {
    const auto id = uint32_t(rules_.size());
    names_.push_back(parent + "_" + std::to_string(id));
    rules_.push_back({std::move(alternatives), at, at});
    return id;
  }

  void push(Sequence& sequence, Element e, size_t at) {
    if (++element_count_ > kMaxElements) fail(at, "grammar too large (more than 262144 elements)");
    sequence.push_back(e);
  }

  uint32_t add_class(CharClass c) {
    normalize(c);
    classes_.push_back(std::move(c));
    return uint32_t(classes_.size() - 1);
  }

  void parse_rule() {
    const size_t start = pos_;
    const std::string name = parse_name();
    skip_space(false);
    if (text_.substr(pos_, 3) != "::=") fail(pos_, "expecting '::=' after rule name '" + name + "'");
    pos_ += 3;
    skip_space(true);
    const uint32_t id = symbol(name, start);
    if (rules_[id].defined_at != kNowhere) fail(start, "rule '" + name + "' defined twice");
    rules_[id].defined_at = start;
    std::vector<Sequence> alternatives = parse_alternatives(name, false);
    rules_[id].alternatives = std::move(alternatives);
    skip_space(false);
    if (!at_end() && text_[pos_] != '\n' && text_[pos_] != '\r')
      fail(pos_, "expecting end of line after rule '" + name + "'");
  }

  std::vector<Sequence> parse_alternatives(const std::string& rule, bool nested) {
    std::vector<Sequence> alternatives;
    alternatives.push_back(parse_sequence(rule, nested));
    while (!at_end() && text_[pos_] == '|') {
      ++pos_;
      skip_space(true);
      alternatives.push_back(parse_sequence(rule, nested));
    }
    return alternatives;
  }

  // The recursion (parse_sequence -> read_group -> parse_alternatives) keeps its frames small:
  // each item is read by a function of its own, not inlined, so the locals and message
  // temporaries of every kind of item are not on the stack once per nesting level (which
  // under AddressSanitizer, where each gets its own slot, made a level 7 KB).
  Sequence parse_sequence(const std::string& rule, bool nested) {
    Sequence sequence;
    size_t last_item = kNowhere;  // where the item a repetition would apply to starts
    while (!at_end()) {
      const char c = text_[pos_];
      if (c == '"' || c == '[' || c == '.' || is_name_char(c)) {
        last_item = sequence.size();
        read_item(sequence);
      } else if (c == '(') {
        last_item = sequence.size();
        read_group(sequence, rule);
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        read_repetition(sequence, last_item, rule, nested);
      } else {
        break;
      }
      skip_space(nested);
    }
    return sequence;
  }

  // A literal, a class, `.` or a rule name.
  [[gnu::noinline]] void read_item(Sequence& sequence) {
    const size_t at = pos_;
    const char c = text_[pos_];
    if (c == '"') {
      ++pos_;
      while (!at_end() && text_[pos_] != '"') {
        const char32_t point = parse_char();
        push(sequence, {Element::Kind::Chars, add_class({{{point, point}}, false})}, at);
      }
      if (at_end()) fail(at, "unterminated string literal");
      ++pos_;
    } else if (c == '[') {
      push(sequence, {Element::Kind::Chars, add_class(parse_class())}, at);
    } else if (c == '.') {
      ++pos_;
      push(sequence, {Element::Kind::Chars, add_class({{}, true})}, at);
    } else {
      const std::string name = parse_name();
      push(sequence, {Element::Kind::Rule, symbol(name, at)}, at);
    }
  }

  // `( alternatives )`: a level of this recursive descent, bounded so deep text cannot
  // overflow the stack.
  [[gnu::noinline]] void read_group(Sequence& sequence, const std::string& rule) {
    const size_t at = pos_;
    if (++groups_open_ > kGbnfMaxNesting || stack_nearly_full()) fail_nesting(at);
    ++pos_;
    skip_space(true);
    std::vector<Sequence> alternatives = parse_alternatives(rule, true);
    if (at_end() || text_[pos_] != ')') fail_unterminated_group(at);
    ++pos_;
    --groups_open_;
    push(sequence, {Element::Kind::Rule, add_helper(rule, at, std::move(alternatives))}, at);
  }

  [[noreturn, gnu::noinline]] void fail_nesting(size_t at) const {
    if (groups_open_ <= kGbnfMaxNesting) fail(at, "parentheses nested too deeply for this thread's stack");
    fail(at, "nested deeper than " + std::to_string(kGbnfMaxNesting) + " levels of parentheses");
  }

  [[noreturn, gnu::noinline]] void fail_unterminated_group(size_t at) const {
    fail(at, "unterminated group: expecting ')'");
  }

  [[gnu::noinline]] void read_repetition(Sequence& sequence, size_t last_item, const std::string& rule, bool nested) {
    if (last_item == kNowhere) fail(pos_, std::string("repetition '") + text_[pos_] + "' with no item before it");
    apply_repetition(sequence, last_item, rule, nested);
  }

  // One code point of a literal or class: an escape, or a UTF-8 character.
  char32_t parse_char() {
    const size_t at = pos_;
    const auto byte = uint8_t(text_[pos_++]);
    if (byte == '\\') {
      if (at_end()) fail(at, "unterminated escape");
      const char e = text_[pos_++];
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-': return char32_t(e);
        case 'x': return parse_hex(at, 2);
        case 'u': return parse_hex(at, 4);
        case 'U': return parse_hex(at, 8);
        default: fail(at, std::string("bad escape '\\") + e + "'");
      }
    }
    if (byte < 0x80) return byte;
    const int length = byte >= 0xF0 && byte <= 0xF4   ? 4
                       : byte >= 0xE0 && byte <= 0xEF ? 3
                       : byte >= 0xC2 && byte <= 0xDF ? 2
                                                      : 0;
    if (length == 0) fail(at, "invalid UTF-8");
    char32_t point = byte & (0x7F >> length);
    for (int i = 1; i < length; ++i) {
      if (at_end() || (uint8_t(text_[pos_]) & 0xC0) != 0x80) fail(at, "invalid UTF-8");
      point = (point << 6) | (uint8_t(text_[pos_++]) & 0x3F);
    }
    if ((length == 3 && point < 0x800) || (length == 4 && point < 0x10000) || point > 0x10FFFF ||
        (point >= 0xD800 && point <= 0xDFFF)) {
      fail(at, "invalid UTF-8");
    }
    return point;
  }

  char32_t parse_hex(size_t at, int digits) {
    char32_t value = 0;
    for (int i = 0; i < digits; ++i) {
      const int d = at_end() ? -1 : hex_value(text_[pos_]);
      if (d < 0) fail(at, "bad escape: expecting " + std::to_string(digits) + " hex digits");
      value = (value << 4) | char32_t(d);
      ++pos_;
    }
    if (value > 0x10FFFF) fail(at, "bad escape: beyond U+10FFFF");
    return value;
  }

  CharClass parse_class() {
    const size_t open = pos_++;
    CharClass c;
    if (!at_end() && text_[pos_] == '^') {
      c.negated = true;
      ++pos_;
    }
    while (true) {
      if (at_end()) fail(open, "unterminated character class");
      if (text_[pos_] == ']') break;
      const size_t at = pos_;
      const char32_t lo = parse_char();
      char32_t hi = lo;
      if (pos_ + 1 < text_.size() && text_[pos_] == '-' && text_[pos_ + 1] != ']') {
        ++pos_;
        hi = parse_char();
        if (hi < lo) fail(at, "character range with its end before its start");
      }
      c.ranges.emplace_back(lo, hi);
    }
    ++pos_;
    return c;
  }

  uint32_t parse_count(size_t at) {
    if (at_end() || text_[pos_] < '0' || text_[pos_] > '9') fail(pos_, "expecting a repetition count");
    uint32_t n = 0;
    while (!at_end() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      n = n * 10 + uint32_t(text_[pos_++] - '0');
      if (n > kMaxRepetition) fail(at, "repetition bound above " + std::to_string(kMaxRepetition));
    }
    return n;
  }

  void apply_repetition(Sequence& sequence, size_t item_start, const std::string& rule, bool nested) {
    const size_t at = pos_;
    uint32_t min = 0, max = 0;
    bool unbounded = false;
    const char op = text_[pos_++];
    if (op == '*') {
      unbounded = true;
    } else if (op == '+') {
      min = 1, unbounded = true;
    } else if (op == '?') {
      max = 1;
    } else {
      skip_space(nested);
      min = max = parse_count(at);
      skip_space(nested);
      if (!at_end() && text_[pos_] == ',') {
        ++pos_;
        skip_space(nested);
        if (!at_end() && text_[pos_] == '}') {
          unbounded = true;
        } else {
          max = parse_count(at);
        }
        skip_space(nested);
      }
      if (at_end() || text_[pos_] != '}') fail(at, "unterminated repetition: expecting '}'");
      ++pos_;
      if (!unbounded && min > max) fail(at, "repetition {m,n} with m > n");
    }

    const Sequence item(sequence.begin() + std::ptrdiff_t(item_start), sequence.end());
    sequence.resize(item_start);
    // A multi-character literal repeats as a whole: one rule, so each copy is one element.
    const Element unit = item.size() == 1 ? item[0] : Element{Element::Kind::Rule, add_helper(rule, at, {item})};
    for (uint32_t i = 0; i < min; ++i) push(sequence, unit, at);
    if (unbounded) {
      const uint32_t star = add_helper(rule, at, {});
      rules_[star].alternatives = {{unit, {Element::Kind::Rule, star}}, {}};
      element_count_ += 2;
      push(sequence, {Element::Kind::Rule, star}, at);
    } else if (max > min) {
      uint32_t tail = add_helper(rule, at, {{unit}, {}});
      for (uint32_t i = min + 1; i < max; ++i) tail = add_helper(rule, at, {{unit, {Element::Kind::Rule, tail}}, {}});
      element_count_ += 2 * (max - min);
      push(sequence, {Element::Kind::Rule, tail}, at);
    }
  }

  // Left recursion: an edge a -> b when b can be the first thing a expands to (only nullable
  // elements before it); a cycle in these edges is a rule reaching itself without reading.
  void refuse_left_recursion() const {
    std::vector<bool> nullable(rules_.size(), false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < rules_.size(); ++r) {
        if (nullable[r]) continue;
        for (const Sequence& alt : rules_[r].alternatives) {
          if (std::all_of(alt.begin(), alt.end(),
                          [&](const Element& e) { return e.kind == Element::Kind::Rule && nullable[e.index]; })) {
            nullable[r] = changed = true;
            break;
          }
        }
      }
    }
    std::vector<std::vector<uint32_t>> first(rules_.size());
    for (size_t r = 0; r < rules_.size(); ++r) {
      for (const Sequence& alt : rules_[r].alternatives) {
        for (const Element& e : alt) {
          if (e.kind != Element::Kind::Rule) break;
          first[r].push_back(e.index);
          if (!nullable[e.index]) break;
        }
      }
    }
    // Iterative depth-first search (helper chains can be thousands deep).
    enum : uint8_t { kUnseen, kOnPath, kDone };
    std::vector<uint8_t> state(rules_.size(), kUnseen);
    std::vector<std::pair<uint32_t, size_t>> path;  // rule, next edge to follow
    for (uint32_t start = 0; start < rules_.size(); ++start) {
      if (state[start] != kUnseen) continue;
      path.emplace_back(start, 0);
      state[start] = kOnPath;
      while (!path.empty()) {
        auto& [rule, edge] = path.back();
        if (edge == first[rule].size()) {
          state[rule] = kDone;
          path.pop_back();
          continue;
        }
        const uint32_t next = first[rule][edge++];
        if (state[next] == kOnPath) {
          std::string cycle;
          size_t i = 0;
          while (path[i].first != next) ++i;
          for (; i < path.size(); ++i) cycle += names_[path[i].first] + " -> ";
          fail(rules_[next].defined_at,
               "left recursion (" + cycle + names_[next] + "): a rule reaches itself before reading a character");
        }
        if (state[next] == kUnseen) {
          state[next] = kOnPath;
          path.emplace_back(next, 0);
        }
      }
    }
  }

  Grammar flatten(uint32_t root) {
    Grammar g;
    g.classes = std::move(classes_);
    g.rule_names = std::move(names_);
    g.rule_alternatives.resize(rules_.size());
    g.elements.reserve(element_count_ + rules_.size() * 2);
    for (size_t r = 0; r < rules_.size(); ++r) {
      for (const Sequence& alt : rules_[r].alternatives) {
        g.rule_alternatives[r].push_back(uint32_t(g.elements.size()));
        g.elements.insert(g.elements.end(), alt.begin(), alt.end());
        g.elements.push_back({Element::Kind::End, 0});
      }
    }
    g.root = root;
    return g;
  }

  std::string_view text_;
  size_t pos_ = 0;
  std::vector<std::string> names_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<DraftRule> rules_;
  std::vector<CharClass> classes_;
  size_t element_count_ = 0;
  size_t groups_open_ = 0;  // around the text being read
};

}  // namespace

Grammar parse_gbnf(std::string_view text) { return Parser(text).parse(); }

}  // namespace pagoda::grammar
