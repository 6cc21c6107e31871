// The filter registry and the filters on single values and text.

#include "engine/jinja/filters.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <unordered_map>

#include "engine/jinja/arguments.h"
#include "engine/jinja/methods.h"
#include "engine/jinja/operators.h"
#include "engine/jinja/strings.h"
#include "engine/jinja/text_spans.h"
#include "engine/jinja/utf8.h"
#include "pagoda/error.h"

namespace pagoda::jinja {

namespace {

std::unordered_map<std::string, FilterFn>& filter_map() {
  static std::unordered_map<std::string, FilterFn> filters;
  return filters;
}

void add_filter(const char* name, FilterFn f) { filter_map()[name] = f; }

const std::unordered_map<std::string, FilterFn>& registry() {
  static const bool filled = [] {
    add_text_filters(add_filter);
    add_sequence_filters(add_filter);
    return true;
  }();
  (void)filled;
  return filter_map();
}

Value keep_markup(const Value& input, std::string s) {
  Value out(std::move(s));
  out.markup = input.markup;
  return out;
}

Value keep_markup(const Value& input, Value out) {
  out.markup = input.markup;
  return out;
}

Value f_upper(const Value& v, const Arguments& a, Budget&) {
  bind_arguments("upper", a, {});
  return keep_markup(v, case_mapped(v, utf8::upper(to_str(v))));
}
Value f_lower(const Value& v, const Arguments& a, Budget&) {
  bind_arguments("lower", a, {});
  return keep_markup(v, case_mapped(v, utf8::lower(to_str(v))));
}
Value f_capitalize(const Value& v, const Arguments& a, Budget&) {
  bind_arguments("capitalize", a, {});
  return keep_markup(v, case_mapped(v, strings::capitalize(to_str(v))));
}

// jinja2's title: every piece between runs of "-", whitespace and opening brackets starts upper
// case and continues lower case.
Value f_title(const Value& v, const Arguments& a, Budget&) {
  bind_arguments("title", a, {});
  const std::u32string cs = utf8::decode(to_str(v));
  auto separator = [](char32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || utf8::is_space(c);
  };
  std::u32string out;
  size_t i = 0;
  while (i < cs.size()) {
    const bool sep = separator(cs[i]);
    size_t j = i;
    while (j < cs.size() && separator(cs[j]) == sep) ++j;
    for (size_t k = i; k < j; ++k) out.push_back(k == i ? utf8::to_upper(cs[k]) : utf8::to_lower(cs[k]));
    i = j;
  }
  return keep_markup(v, case_mapped(v, utf8::encode(out)));
}

Value f_trim(const Value& v, const Arguments& a, Budget&) {
  const auto p = bind_arguments("trim", a, {"chars"});
  std::optional<std::string> chars;
  if (p[0].is_string()) chars = p[0].str();
  const Value text = to_text(v);
  return keep_markup(v, stripped_part(text, strings::strip(text.str(), chars, true, true), true, true));
}

Value f_replace(const Value& v, const Arguments& a, Budget& budget) {
  const auto p = bind_arguments("replace", a, {"old", "new", "count"});
  const int64_t count = p[2].is_undefined() || p[2].is_none() ? -1 : as_int(p[2]);
  return keep_markup(v, replace_tracked(to_text(v), to_str(p[0]), to_text(p[1]), count, budget.limits().max_output));
}

Value f_center(const Value& v, const Arguments& a, Budget& budget) {
  const auto p = bind_arguments("center", a, {"width"});
  const int64_t width = p[0].is_undefined() ? 80 : as_int(p[0]);
  budget.check_size(static_cast<size_t>(std::max<int64_t>(width, 0)));
  return Value(strings::center(to_str(v), width));
}

Value f_indent(const Value& v, const Arguments& a, Budget& budget) {
  const auto p = bind_arguments("indent", a, {"width", "first", "blank"});
  std::string indention;
  if (p[0].is_string()) {
    indention = p[0].str();
  } else {
    const int64_t width = p[0].is_undefined() ? 4 : as_int(p[0]);
    budget.check_size(static_cast<size_t>(std::max<int64_t>(width, 0)));
    indention.assign(static_cast<size_t>(std::max<int64_t>(width, 0)), ' ');
  }
  // jinja2 appends a newline so that splitlines keeps a trailing empty line
  const std::vector<std::string> lines = strings::splitlines(to_str(v) + "\n", false);
  budget.check_size(to_str(v).size() + lines.size() * indention.size());
  std::string out;
  if (truthy(p[2])) {
    for (size_t i = 0; i < lines.size(); ++i) out += (i ? "\n" + indention : "") + lines[i];
  } else {
    out = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) out += "\n" + (lines[i].empty() ? "" : indention + lines[i]);
  }
  if (truthy(p[1])) out = indention + out;
  return keep_markup(v, std::move(out));
}

// Python's \w beyond ASCII, roughly: letters and digits of every script count, the
// punctuation, symbol and emoji blocks do not.
bool word_character(char32_t c) {
  if (utf8::is_space(c)) return false;
  if (c < 0xC0) return c == 0xAA || c == 0xB2 || c == 0xB3 || c == 0xB5 || c == 0xB9 || c == 0xBA;
  if (c == 0xD7 || c == 0xF7) return false;
  if (c >= 0x2000 && c <= 0x2BFF) return false;
  if (c >= 0x3000 && c <= 0x303F) return false;
  if ((c >= 0xFE30 && c <= 0xFE4F) || (c >= 0xFF00 && c <= 0xFF0F)) return false;
  if (c >= 0x1F000 && c <= 0x1FAFF) return false;
  return true;
}

Value f_wordcount(const Value& v, const Arguments& a, Budget&) {
  bind_arguments("wordcount", a, {});
  int64_t words = 0;
  bool in_word = false;
  for (char32_t c : utf8::decode(to_str(v))) {
    const bool word = c == '_' || (c < 0x80 ? std::isalnum(static_cast<int>(c)) != 0 : word_character(c));
    if (word && !in_word) ++words;
    in_word = word;
  }
  return Value(words);
}

Value f_string(const Value& v, const Arguments& a, Budget&) {
  bind_arguments("string", a, {});
  if (v.is_string()) return v;
  return Value(to_str(v));
}

Value f_safe(const Value& v, const Arguments& a, Budget&) {
  bind_arguments("safe", a, {});
  return make_markup(to_str(v));
}

Value f_escape(const Value& v, const Arguments& a, Budget&) {
  bind_arguments("escape", a, {});
  if (v.markup) return v;
  return make_markup(strings::html_escape(to_str(v)));
}

Value f_forceescape(const Value& v, const Arguments& a, Budget&) {
  bind_arguments("forceescape", a, {});
  return make_markup(strings::html_escape(to_str(v)));
}

Value f_format(const Value& v, const Arguments& a, Budget& budget) {
  Value args;
  if (!a.keyword.empty()) {
    Dict d;
    for (const auto& [k, val] : a.keyword) d.set(Value(k), val);
    args = make_dict(std::move(d));
  } else {
    args = make_list(a.positional, true);
  }
  Value out = percent_format(to_text(v), args);
  budget.check_size(out.str().size());
  return out;
}

Value f_default(const Value& v, const Arguments& a, Budget&) {
  const auto p = bind_arguments("default", a, {"default_value", "boolean"});
  if (v.is_undefined() || (truthy(p[1]) && !truthy(v))) return p[0].is_undefined() ? Value("") : p[0];
  return v;
}

// Python's int(str, base): optional sign, digits with single underscores between, whitespace
// around; nullopt when that is not what `s` holds.
std::optional<int64_t> parse_int(const std::string& text, int base) {
  const std::string s = strings::strip(text, std::nullopt, true, true);
  size_t i = 0;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  if (base == 16 && s.compare(i, 2, "0x") == 0) i += 2;
  if (base == 8 && s.compare(i, 2, "0o") == 0) i += 2;
  if (base == 2 && s.compare(i, 2, "0b") == 0) i += 2;
  std::string digits;
  for (; i < s.size(); ++i) {
    if (s[i] == '_' && !digits.empty() && i + 1 < s.size() && s[i + 1] != '_') continue;
    digits.push_back(s[i]);
  }
  if (digits.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(digits.c_str(), &end, base);
  if (*end != '\0' || errno == ERANGE || !std::isalnum(static_cast<unsigned char>(digits[0]))) return std::nullopt;
  return negative ? -v : v;
}

// Python's float(str): decimal or exponent notation, inf, nan, with whitespace around.
std::optional<double> parse_float(const std::string& text) {
  const std::string s = strings::strip(text, std::nullopt, true, true);
  if (s.empty() || s.find('_') != std::string::npos) return std::nullopt;
  const std::string lower = utf8::lower(s);
  if (lower.find("0x") != std::string::npos) return std::nullopt;  // strtod's hex floats
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (*end != '\0') return std::nullopt;
  return d;
}

Value f_int(const Value& v, const Arguments& a, Budget&) {
  const auto p = bind_arguments("int", a, {"default", "base"});
  const Value fallback = p[0].is_undefined() ? Value(0) : p[0];
  const int base = p[1].is_undefined() ? 10 : static_cast<int>(as_int(p[1]));
  if (v.is_int() || v.is_bool()) return Value(as_int(v));
  if (v.is_float()) {
    const double d = std::get<double>(v.v);
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return fallback;
    return Value(static_cast<int64_t>(d));
  }
  if (v.is_string()) {
    if (auto i = parse_int(v.str(), base)) return Value(*i);
    if (auto d = parse_float(v.str()); d && std::isfinite(*d) && std::fabs(*d) < 9.2e18)
      return Value(static_cast<int64_t>(*d));
  }
  return fallback;
}

Value f_float(const Value& v, const Arguments& a, Budget&) {
  const auto p = bind_arguments("float", a, {"default"});
  const Value fallback = p[0].is_undefined() ? Value(0.0) : p[0];
  if (v.is_number()) return Value(as_double(v));
  if (v.is_string()) {
    if (auto d = parse_float(v.str())) return Value(*d);
  }
  return fallback;
}

Value f_abs(const Value& v, const Arguments& a, Budget&) {
  bind_arguments("abs", a, {});
  if (v.is_float()) return Value(std::fabs(std::get<double>(v.v)));
  if (v.is_int() || v.is_bool()) {
    const int64_t i = as_int(v);
    if (i == INT64_MIN) throw Error("integer overflow");
    return Value(i < 0 ? -i : i);
  }
  require_defined(v);
  throw Error("bad operand type for abs(): '" + type_name(v) + "'");
}

Value f_round(const Value& v, const Arguments& a, Budget&) {
  const auto p = bind_arguments("round", a, {"precision", "method"});
  const int64_t precision = p[0].is_undefined() ? 0 : as_int(p[0]);
  const std::string method = p[1].is_undefined() ? "common" : to_str(p[1]);
  if (method != "common" && method != "ceil" && method != "floor") {
    throw Error("method must be 'common', 'ceil' or 'floor'");
  }
  if (!v.is_number()) {
    require_defined(v);
    throw Error("type " + type_name(v) + " doesn't define __round__ method");
  }
  if (method == "common" && !v.is_float()) return Value(as_int(v));  // round(int, n) stays an int
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = as_double(v) * scale;
  const double r = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::nearbyint(x);
  return Value(r / scale);
}

Value f_attr(const Value& v, const Arguments& a, Budget& budget) {
  const auto p = bind_arguments("attr", a, {"name"});
  return get_attribute(v, to_str(p[0]), budget);
}

// transformers' tojson: json.dumps(x, ensure_ascii=False, indent=..., separators=..., sort_keys=...).
Value f_tojson(const Value& v, const Arguments& a, Budget& budget) {
  const auto p = bind_arguments("tojson", a, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonStyle style;
  if (p[1].is_string()) {
    style.indent = p[1].str();
  } else if (p[1].is_int()) {
    style.indent = std::string(static_cast<size_t>(std::max<int64_t>(as_int(p[1]), 0)), ' ');
  } else if (!p[1].is_undefined() && !p[1].is_none()) {
    throw Error("tojson: indent must be an int or a str");
  }
  style.item_separator = style.indent ? "," : ", ";
  if (p[2].is_list() && p[2].list().items.size() == 2 && p[2].list().items[0].is_string() &&
      p[2].list().items[1].is_string()) {
    style.item_separator = p[2].list().items[0].str();
    style.key_separator = p[2].list().items[1].str();
  } else if (!p[2].is_undefined() && !p[2].is_none()) {
    throw Error("tojson: separators must be a pair of strings");
  }
  style.sort_keys = truthy(p[3]);
  std::string out = dumps(v, style);
  if (truthy(p[0])) {
    std::string ascii;
    char buf[16];
    for (char32_t c : utf8::decode(out)) {
      if (c < 0x80) {
        ascii.push_back(static_cast<char>(c));
      } else if (c < 0x10000) {
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
        ascii += buf;
      } else {
        const char32_t u = c - 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (u >> 10)),
                      static_cast<unsigned>(0xDC00 + (u & 0x3FF)));
        ascii += buf;
      }
    }
    out = std::move(ascii);
  }
  budget.check_size(out.size());
  return Value(std::move(out));
}

}  // namespace

void add_text_filters(void (*add)(const char* name, FilterFn f)) {
  add("upper", f_upper);
  add("lower", f_lower);
  add("capitalize", f_capitalize);
  add("title", f_title);
  add("trim", f_trim);
  add("replace", f_replace);
  add("center", f_center);
  add("indent", f_indent);
  add("wordcount", f_wordcount);
  add("string", f_string);
  add("safe", f_safe);
  add("escape", f_escape);
  add("e", f_escape);
  add("forceescape", f_forceescape);
  add("format", f_format);
  add("default", f_default);
  add("d", f_default);
  add("int", f_int);
  add("float", f_float);
  add("abs", f_abs);
  add("round", f_round);
  add("attr", f_attr);
  add("tojson", f_tojson);
}

bool has_filter(const std::string& name) { return registry().count(name) != 0; }

Value apply_filter(const std::string& name, const Value& input, const Arguments& args, Budget& budget) {
  const auto it = registry().find(name);
  if (it == registry().end()) throw Error("no filter named '" + name + "'");
  budget.step();
  // Filters that do not track data ranges themselves give a string that is data whole when
  // their input or arguments held data.
  return widen(it->second(input, args, budget), input, &args);
}

Value get_path(const Value& item, const std::string& attribute, Budget& budget) {
  Value v = item;
  size_t start = 0;
  while (true) {
    const size_t dot = attribute.find('.', start);
    const std::string part = attribute.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool digits = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    int64_t number = 0;
    const bool is_index = digits && std::from_chars(part.data(), part.data() + part.size(), number).ec == std::errc();
    v = get_item(v, is_index ? Value(number) : Value(part), budget);
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

}  // namespace pagoda::jinja
