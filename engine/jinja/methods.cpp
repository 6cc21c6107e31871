#include "engine/jinja/methods.h"

#include <cctype>

#include "engine/jinja/arguments.h"
#include "engine/jinja/operators.h"
#include "engine/jinja/strings.h"
#include "engine/jinja/text_spans.h"
#include "engine/jinja/utf8.h"
#include "pagoda/error.h"

namespace pagoda::jinja {

namespace {

std::optional<std::string> optional_string(const Value& v, const char* what) {
  if (v.is_undefined() || v.is_none()) return std::nullopt;
  if (!v.is_string()) throw Error(std::string(what) + " arg must be None or str");
  return v.str();
}

int64_t int_or(const Value& v, int64_t fallback) {
  if (v.is_undefined()) return fallback;
  if (!v.is_int() && !v.is_bool()) throw Error("'" + type_name(v) + "' object cannot be interpreted as an integer");
  return as_int(v);
}

const std::string& string_arg(const Value& v, const char* method) {
  if (!v.is_string()) {
    require_defined(v);
    throw Error(std::string(method) + "() argument must be str, not " + type_name(v));
  }
  return v.str();
}

bool all_chars(const std::string& s, bool (*pred)(char32_t)) {
  const std::u32string cs = utf8::decode(s);
  if (cs.empty()) return false;
  for (char32_t c : cs) {
    if (!pred(c)) return false;
  }
  return true;
}

bool is_alpha(char32_t c) { return c < 0x80 ? std::isalpha(static_cast<int>(c)) != 0 : utf8::is_cased(c); }
bool is_digit(char32_t c) { return c >= '0' && c <= '9'; }
bool is_alnum(char32_t c) { return is_alpha(c) || is_digit(c); }

// Python's str.startswith/endswith with a str or a tuple of str.
bool affix(const std::string& s, const Value& what, bool prefix) {
  auto test = [&](const Value& a) {
    const std::string& x = string_arg(a, prefix ? "startswith" : "endswith");
    if (x.size() > s.size()) return false;
    return prefix ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (what.is_list() && what.list().tuple) {
    for (const Value& a : what.list().items) {
      if (test(a)) return true;
    }
    return false;
  }
  return test(what);
}

// str.format with automatic ({}), numbered ({0}) and named ({name}) fields, without specs; the
// format's text and the fields keep their data ranges.
Value format(const Value& format_value, const Arguments& args) {
  const std::string& fmt = format_value.str();
  TextBuilder out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if ((c == '{' || c == '}') && i + 1 < fmt.size() && fmt[i + 1] == c) {
      out.append(format_value, i, i + 1);
      ++i;
      continue;
    }
    if (c == '}') throw Error("Single '}' encountered in format string");
    if (c != '{') {
      out.append(format_value, i, i + 1);
      continue;
    }
    const size_t close = fmt.find('}', i);
    if (close == std::string::npos) throw Error("Single '{' encountered in format string");
    const std::string field = fmt.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!.[") != std::string::npos) throw Error("format specifications are not supported");
    Value v;
    if (field.empty() || std::isdigit(static_cast<unsigned char>(field[0]))) {
      const size_t k = field.empty() ? auto_index++ : std::stoul(field);
      if (k >= args.positional.size()) throw Error("Replacement index " + std::to_string(k) + " out of range");
      v = args.positional[k];
    } else {
      bool found = false;
      for (const auto& [name, value] : args.keyword) {
        if (name == field) {
          v = value;
          found = true;
        }
      }
      if (!found) throw Error("KeyError: '" + field + "'");
    }
    out.append(to_text(v));
    i = close;
  }
  return out.take();
}

Value join(const Value& sep, const Value& iterable, Budget& budget) {
  TextBuilder out;
  bool first = true;
  for (const Value& item : iterate(iterable)) {
    if (!item.is_string()) throw Error("sequence item: expected str instance, " + type_name(item) + " found");
    if (!first) out.append(sep);
    first = false;
    out.append(item);
    budget.step();
    budget.check_size(out.size());
  }
  return out.take();
}

Value string_method(const Value& self, const std::string& name, Budget& budget) {
  const std::string& s = self.str();
  Budget* b = &budget;
  auto method = [&](std::function<Value(Arguments&)> f) { return make_function("str." + name, std::move(f)); };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    return method([self, name](Arguments& a) {
      const auto p = bind_arguments(name, a, {"chars"});
      const bool left = name != "rstrip", right = name != "lstrip";
      return stripped_part(self, strings::strip(self.str(), optional_string(p[0], name.c_str()), left, right), left,
                           right);
    });
  }
  if (name == "split" || name == "rsplit") {
    return method([self, name](Arguments& a) {
      const auto p = bind_arguments(name, a, {"sep", "maxsplit"});
      const auto sep = optional_string(p[0], "sep");
      const int64_t maxsplit = int_or(p[1], -1);
      const std::string& s = self.str();
      return located_parts(self,
                           name == "split" ? strings::split(s, sep, maxsplit) : strings::rsplit(s, sep, maxsplit));
    });
  }
  if (name == "splitlines") {
    return method([self](Arguments& a) {
      const auto p = bind_arguments("splitlines", a, {"keepends"});
      return located_parts(self, strings::splitlines(self.str(), truthy(p[0])));
    });
  }
  if (name == "startswith" || name == "endswith") {
    return method([s, name](Arguments& a) {
      const auto p = bind_arguments(name, a, {"prefix"});
      return Value(affix(s, p[0], name == "startswith"));
    });
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    return method([self, name](Arguments& a) {
      bind_arguments(name, a, {});
      const std::string& s = self.str();
      if (name == "upper") return case_mapped(self, utf8::upper(s));
      if (name == "lower") return case_mapped(self, utf8::lower(s));
      if (name == "title") return case_mapped(self, strings::title(s));
      return case_mapped(self, strings::capitalize(s));
    });
  }
  if (name == "replace") {
    return method([self, b](Arguments& a) {
      const auto p = bind_arguments("replace", a, {"old", "new", "count"});
      const std::string& old = string_arg(p[0], "replace");
      string_arg(p[1], "replace");
      // Replacing data: a replacement made of data could complete a control token with the
      // template's text around it, so its copies carry its ranges.
      return replace_tracked(self, old, p[1], int_or(p[2], -1), b->limits().max_output);
    });
  }
  if (name == "find" || name == "rfind" || name == "count") {
    return method([s, name](Arguments& a) {
      const auto p = bind_arguments(name, a, {"sub"});
      const std::string& sub = string_arg(p[0], name.c_str());
      if (name == "count") return Value(strings::count(s, sub));
      return Value(strings::find(s, sub, name == "rfind"));
    });
  }
  if (name == "join") {
    return method([self, b](Arguments& a) {
      const auto p = bind_arguments("join", a, {"iterable"});
      return join(self, p[0], *b);
    });
  }
  if (name == "format") {
    return method([self, b](Arguments& a) {
      Value out = format(self, a);
      b->check_size(out.str().size());
      return out;
    });
  }
  if (name == "center") {
    return method([self, b](Arguments& a) {
      const auto p = bind_arguments("center", a, {"width"});
      const int64_t width = int_or(p[0], 0);
      b->check_size(static_cast<size_t>(std::max<int64_t>(width, 0)));
      return widen(Value(strings::center(self.str(), width)), self);
    });
  }
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" || name == "isupper" ||
      name == "islower") {
    return method([s, name](Arguments& a) {
      bind_arguments(name, a, {});
      if (name == "isdigit") return Value(all_chars(s, is_digit));
      if (name == "isalpha") return Value(all_chars(s, is_alpha));
      if (name == "isalnum") return Value(all_chars(s, is_alnum));
      if (name == "isspace") return Value(all_chars(s, utf8::is_space));
      // isupper/islower: some cased character, and none of the other case
      const bool want_upper = name == "isupper";
      bool cased = false;
      for (char32_t c : utf8::decode(s)) {
        if (!utf8::is_cased(c)) continue;
        cased = true;
        if ((utf8::to_upper(c) == c) != want_upper) return Value(false);
      }
      return Value(cased);
    });
  }
  return Value(Undefined{"'str object' has no attribute '" + name + "'"});
}

Value dict_method(const Value& d, const std::string& name) {
  if (name == "items" || name == "keys" || name == "values") {
    return make_function("dict." + name, [d, name](Arguments& a) {
      bind_arguments(name, a, {});
      std::vector<Value> out;
      for (const auto& [k, v] : d.dict().items) {
        if (name == "items") out.push_back(make_list({k, v}, true));
        else out.push_back(name == "keys" ? k : v);
      }
      return make_list(std::move(out));
    });
  }
  if (name == "get") {
    return make_function("dict.get", [d](Arguments& a) {
      const auto p = bind_arguments("get", a, {"key", "default"});
      const Value* found = d.dict().find(p[0]);
      if (found) return *found;
      return p[1].is_undefined() ? Value(None{}) : p[1];
    });
  }
  return Value();
}

Value list_method(const Value& l, const std::string& name) {
  if (name == "index" || name == "count") {
    return make_function("list." + name, [l, name](Arguments& a) {
      const auto p = bind_arguments(name, a, {"value"});
      int64_t n = 0;
      const auto& items = l.list().items;
      for (size_t i = 0; i < items.size(); ++i) {
        if (!equals(items[i], p[0])) continue;
        if (name == "index") return Value(static_cast<int64_t>(i));
        ++n;
      }
      if (name == "index") throw Error(repr(p[0]) + " is not in list");
      return Value(n);
    });
  }
  return Value();
}

bool mutates(const Value& obj, const std::string& name) {
  if (obj.is_list()) {
    return !obj.list().tuple && (name == "append" || name == "extend" || name == "insert" || name == "pop" ||
                                 name == "remove" || name == "reverse" || name == "sort" || name == "clear");
  }
  if (obj.is_dict()) {
    return name == "pop" || name == "popitem" || name == "setdefault" || name == "update" || name == "clear";
  }
  return false;
}

Value no_attribute(const Value& obj, const std::string& name) {
  return Value(Undefined{object_name(obj) + " has no attribute '" + name + "'"});
}

}  // namespace

Value get_attribute(const Value& obj, const std::string& name, Budget& budget) {
  require_defined(obj);
  if (mutates(obj, name)) {
    return Value(Undefined{"access to attribute '" + name + "' of '" + type_name(obj) + "' object is unsafe."});
  }
  if (obj.is_string()) return string_method(obj, name, budget);
  if (obj.is_dict()) {
    Value m = dict_method(obj, name);
    if (!m.is_undefined()) return m;
    if (const Value* v = obj.dict().find(Value(name))) return *v;
    return no_attribute(obj, name);
  }
  if (obj.is_list()) {
    Value m = list_method(obj, name);
    if (!m.is_undefined()) return m;
    return no_attribute(obj, name);
  }
  if (obj.is_namespace()) {
    if (const Value* v = std::get<NamespacePtr>(obj.v)->attributes.find(Value(name))) return *v;
  }
  return no_attribute(obj, name);
}

Value get_item(const Value& obj, const Value& key, Budget& budget) {
  require_defined(obj);
  if (obj.is_dict()) {
    if (const Value* v = obj.dict().find(key)) return *v;
  } else if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    if (auto v = index(obj, as_int(key))) return *v;
    return Value(Undefined{object_name(obj) + " has no element " + to_str(key)});
  }
  if (key.is_string()) return get_attribute(obj, key.str(), budget);
  return Value(Undefined{object_name(obj) + " has no element " + repr(key)});
}

}  // namespace pagoda::jinja
