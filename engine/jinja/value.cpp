// Python's semantics for the template values: truthiness, str(), repr(), ==, ordering, and
// json.dumps as transformers' tojson calls it.

#include "engine/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "engine/jinja/text_spans.h"
#include "engine/jinja/utf8.h"
#include "engine/util/utf8.h"
#include "pagoda/error.h"

namespace pagoda::jinja {

namespace {

// Nesting beyond this in repr() or tojson is refused rather than recursed into (namespaces can
// hold themselves).
constexpr int kMaxNesting = 256;

void check_nesting(int depth) {
  if (depth > kMaxNesting) throw Error("value nested deeper than " + std::to_string(kMaxNesting) + " levels");
}

int checked_depth(int depth) {
  if (depth > kMaxValueDepth) throw Error("value nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
  return depth;
}

void repr_string(std::string& out, const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  out.push_back(quote);
  for (char32_t c : utf8::decode(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      out += buf;
    } else if ((c >= 0x2028 && c <= 0x202E) || (c >= 0x200B && c <= 0x200F) || c == 0xFEFF) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      append_utf8(c, out);
    }
  }
  out.push_back(quote);
}

void repr_into(std::string& out, const Value& v, int depth);

void repr_items(std::string& out, const Dict& d, int depth) {
  out.push_back('{');
  bool first = true;
  for (const auto& [k, val] : d.items) {
    if (!first) out += ", ";
    first = false;
    repr_into(out, k, depth + 1);
    out += ": ";
    repr_into(out, val, depth + 1);
  }
  out.push_back('}');
}

void repr_into(std::string& out, const Value& v, int depth) {
  check_nesting(depth);
  if (v.is_string()) {
    repr_string(out, v.str());
  } else if (v.is_list() && v.list().generator) {
    out += "<generator object>";
  } else if (v.is_list()) {
    const List& l = v.list();
    out.push_back(l.tuple ? '(' : '[');
    for (size_t i = 0; i < l.items.size(); ++i) {
      if (i) out += ", ";
      repr_into(out, l.items[i], depth + 1);
    }
    if (l.tuple && l.items.size() == 1) out.push_back(',');
    out.push_back(l.tuple ? ')' : ']');
  } else if (v.is_dict()) {
    repr_items(out, v.dict(), depth);
  } else if (v.is_namespace()) {
    out += "<Namespace ";
    repr_items(out, std::get<NamespacePtr>(v.v)->attributes, depth);
    out += ">";
  } else if (v.is_undefined()) {
    out += "Undefined";
  } else {
    out += to_str(v);
  }
}

void json_string(std::string& out, const std::string& s) {
  out.push_back('"');
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out.push_back(ch);
        }
    }
  }
  out.push_back('"');
}

std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return float_repr(d);
}

std::string json_key(const Value& k) {
  if (k.is_string()) return k.str();
  if (k.is_bool()) return std::get<bool>(k.v) ? "true" : "false";
  if (k.is_int()) return std::to_string(std::get<int64_t>(k.v));
  if (k.is_float()) return json_float(std::get<double>(k.v));
  if (k.is_none()) return "null";
  throw Error("keys must be str, int, float, bool or None, not " + type_name(k));
}

void newline_indent(std::string& out, const JsonStyle& style, int level) {
  out.push_back('\n');
  for (int i = 0; i < level; ++i) out += *style.indent;
}

void dumps_into(std::string& out, const Value& v, const JsonStyle& style, int level) {
  check_nesting(level);
  if (v.is_none()) {
    out += "null";
  } else if (v.is_bool()) {
    out += std::get<bool>(v.v) ? "true" : "false";
  } else if (v.is_int()) {
    out += std::to_string(std::get<int64_t>(v.v));
  } else if (v.is_float()) {
    out += json_float(std::get<double>(v.v));
  } else if (v.is_string()) {
    json_string(out, v.str());
  } else if (v.is_list() && !v.list().generator) {
    const auto& items = v.list().items;
    if (items.empty()) {
      out += "[]";
      return;
    }
    out.push_back('[');
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += style.item_separator;
      if (style.indent) newline_indent(out, style, level + 1);
      dumps_into(out, items[i], style, level + 1);
    }
    if (style.indent) newline_indent(out, style, level);
    out.push_back(']');
  } else if (v.is_dict()) {
    std::vector<const std::pair<Value, Value>*> items;
    for (const auto& item : v.dict().items) items.push_back(&item);
    if (items.empty()) {
      out += "{}";
      return;
    }
    if (style.sort_keys) {
      std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return compare(a->first, b->first) < 0; });
    }
    out.push_back('{');
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += style.item_separator;
      if (style.indent) newline_indent(out, style, level + 1);
      json_string(out, json_key(items[i]->first));
      out += style.key_separator;
      dumps_into(out, items[i]->second, style, level + 1);
    }
    if (style.indent) newline_indent(out, style, level);
    out.push_back('}');
  } else {
    throw Error("Object of type " + type_name(v) + " is not JSON serializable");
  }
}

}  // namespace

Value Arguments::keyword_name(size_t i) const {
  for (const auto& [at, name] : data_keywords) {
    if (at == i) return name;
  }
  return Value(keyword[i].first);
}

const Value* Dict::find(const Value& key) const {
  for (const auto& [k, v] : items) {
    if (equals(k, key)) return &v;
  }
  return nullptr;
}

void Dict::set(const Value& key, Value value) {
  for (auto& [k, v] : items) {
    if (equals(k, key)) {
      depth = checked_depth(std::max(depth, 1 + nesting(value)));
      v = std::move(value);
      return;
    }
  }
  depth = checked_depth(std::max({depth, 1 + nesting(key), 1 + nesting(value)}));
  items.emplace_back(key, std::move(value));
}

int nesting(const Value& v) {
  if (v.is_list()) return v.list().depth;
  if (v.is_dict()) return v.dict().depth;
  if (v.is_namespace()) return std::get<NamespacePtr>(v.v)->attributes.depth;
  return 0;
}

Value make_list(std::vector<Value> items, bool tuple) {
  auto l = std::make_shared<List>();
  for (const Value& item : items) l->depth = std::max(l->depth, 1 + nesting(item));
  checked_depth(l->depth);
  l->items = std::move(items);
  l->tuple = tuple;
  return Value(std::move(l));
}

Value make_generator(std::vector<Value> items) {
  Value v = make_list(std::move(items));
  v.list().generator = true;
  return v;
}

Value make_dict(Dict d) {
  for (const auto& [k, v] : d.items) d.depth = std::max({d.depth, 1 + nesting(k), 1 + nesting(v)});
  checked_depth(d.depth);
  return Value(std::make_shared<Dict>(std::move(d)));
}

Value make_markup(std::string s) {
  Value v(std::move(s));
  v.markup = true;
  return v;
}

Value make_function(std::string name, std::function<Value(Arguments&)> call) {
  return Value(std::make_shared<Function>(Function{std::move(name), std::move(call)}));
}

std::string type_name(const Value& v) {
  if (v.is_undefined()) return "Undefined";
  if (v.is_none()) return "NoneType";
  if (v.is_bool()) return "bool";
  if (v.is_int()) return "int";
  if (v.is_float()) return "float";
  if (v.is_string()) return "str";
  if (v.is_list()) return v.list().generator ? "generator" : (v.list().tuple ? "tuple" : "list");
  if (v.is_dict()) return "dict";
  if (v.is_namespace()) return "Namespace";
  return "function";
}

std::string object_name(const Value& v) { return "'" + type_name(v) + " object'"; }

void require_defined(const Value& v) {
  if (v.is_undefined()) throw Error(std::get<Undefined>(v.v).hint);
}

bool truthy(const Value& v) {
  if (v.is_undefined() || v.is_none()) return false;
  if (v.is_bool()) return std::get<bool>(v.v);
  if (v.is_int()) return std::get<int64_t>(v.v) != 0;
  if (v.is_float()) return std::get<double>(v.v) != 0.0;
  if (v.is_string()) return !v.str().empty();
  if (v.is_list()) return v.list().generator || !v.list().items.empty();
  if (v.is_dict()) return !v.dict().items.empty();
  return true;
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  const std::string sci(buf, res.ptr);  // "-1.2345e+02": shortest round-trip digits
  const size_t e = sci.find('e');
  const bool negative = sci[0] == '-';
  std::string digits;
  for (size_t i = negative ? 1 : 0; i < e; ++i) {
    if (sci[i] != '.') digits.push_back(sci[i]);
  }
  const int exponent = std::stoi(sci.substr(e + 1));
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    } else {
      const size_t int_digits = static_cast<size_t>(exponent) + 1;
      if (digits.size() <= int_digits) {
        out += digits + std::string(int_digits - digits.size(), '0') + ".0";
      } else {
        out += digits.substr(0, int_digits) + "." + digits.substr(int_digits);
      }
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exp_buf[16];
  std::snprintf(exp_buf, sizeof exp_buf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp_buf;
}

std::string to_str(const Value& v) {
  if (v.is_undefined()) return "";
  if (v.is_none()) return "None";
  if (v.is_bool()) return std::get<bool>(v.v) ? "True" : "False";
  if (v.is_int()) return std::to_string(std::get<int64_t>(v.v));
  if (v.is_float()) return float_repr(std::get<double>(v.v));
  if (v.is_string()) return v.str();
  if (v.is_function()) return "<function " + std::get<FunctionPtr>(v.v)->name + ">";
  return repr(v);
}

std::string repr(const Value& v) {
  std::string out;
  repr_into(out, v, 0);
  return out;
}

double as_double(const Value& v) {
  if (v.is_float()) return std::get<double>(v.v);
  return static_cast<double>(as_int(v));
}

int64_t as_int(const Value& v) {
  if (v.is_bool()) return std::get<bool>(v.v) ? 1 : 0;
  if (v.is_int()) return std::get<int64_t>(v.v);
  if (v.is_float()) return static_cast<int64_t>(std::get<double>(v.v));
  throw Error("expected a number, got " + type_name(v));
}

namespace {

bool equals_at(const Value& a, const Value& b, int depth) {
  check_nesting(depth);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return as_double(a) == as_double(b);
    return as_int(a) == as_int(b);
  }
  if (a.v.index() != b.v.index()) return false;
  if (a.is_undefined() || a.is_none()) return true;
  if (a.is_string()) return a.str() == b.str();
  if (a.is_list()) {
    const List& x = a.list();
    const List& y = b.list();
    if (x.generator || y.generator) return &x == &y;
    if (x.tuple != y.tuple || x.items.size() != y.items.size()) return false;
    for (size_t i = 0; i < x.items.size(); ++i) {
      if (!equals_at(x.items[i], y.items[i], depth + 1)) return false;
    }
    return true;
  }
  if (a.is_dict()) {
    const Dict& x = a.dict();
    const Dict& y = b.dict();
    if (x.items.size() != y.items.size()) return false;
    for (const auto& [k, v] : x.items) {
      const Value* other = y.find(k);
      if (!other || !equals_at(v, *other, depth + 1)) return false;
    }
    return true;
  }
  if (a.is_namespace()) return std::get<NamespacePtr>(a.v) == std::get<NamespacePtr>(b.v);
  return std::get<FunctionPtr>(a.v) == std::get<FunctionPtr>(b.v);
}

int compare_at(const Value& a, const Value& b, int depth) {
  check_nesting(depth);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = as_double(a), y = as_double(b);
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    const int64_t x = as_int(a), y = as_int(b);
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.str().compare(b.str());  // UTF-8 byte order is code point order
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list() && a.list().tuple == b.list().tuple && !a.list().generator && !b.list().generator) {
    const auto& x = a.list().items;
    const auto& y = b.list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equals_at(x[i], y[i], depth + 1)) return compare_at(x[i], y[i], depth + 1);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  require_defined(a);
  require_defined(b);
  throw Error("ordering not supported between instances of '" + type_name(a) + "' and '" + type_name(b) + "'");
}

}  // namespace

bool equals(const Value& a, const Value& b) { return equals_at(a, b, 0); }
int compare(const Value& a, const Value& b) { return compare_at(a, b, 0); }

std::vector<Value> iterate(const Value& v) {
  if (v.is_undefined()) return {};
  if (v.is_list()) return v.list().items;
  if (v.is_dict()) {
    std::vector<Value> keys;
    for (const auto& item : v.dict().items) keys.push_back(item.first);
    return keys;
  }
  if (v.is_string()) {
    std::vector<Value> chars;
    size_t at = 0;
    for (char32_t c : utf8::decode(v.str())) {
      std::string s;
      append_utf8(c, s);
      const size_t n = s.size();
      // Invalid UTF-8 decodes to U+FFFD of another length: such a string is data whole.
      chars.push_back(spans_of(v)
                          ? (v.str().compare(at, n, s) == 0 ? substring(v, at, at + n) : data_string(std::move(s)))
                          : Value(std::move(s)));
      at += n;
    }
    return chars;
  }
  throw Error("'" + type_name(v) + "' object is not iterable");
}

int64_t length(const Value& v) {
  if (v.is_undefined()) return 0;
  if (v.is_string()) return static_cast<int64_t>(utf8::length(v.str()));
  if (v.is_list() && !v.list().generator) return static_cast<int64_t>(v.list().items.size());
  if (v.is_dict()) return static_cast<int64_t>(v.dict().items.size());
  throw Error("object of type '" + type_name(v) + "' has no len()");
}

namespace {

// Templates such as Phi-3's spell a turn's control token around its role ('<|' + role + '|>'),
// so the roles the chat API knows are template text; any other role stays data.
bool is_known_role(const std::string& role) {
  return role == "system" || role == "user" || role == "assistant" || role == "tool" || role == "developer" ||
         role == "function" || role == "ipython";
}

Value json_scalar(const nlohmann::ordered_json& j, bool data) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value(None{});
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return data ? data_string(j.get<std::string>()) : Value(j.get<std::string>());
    default: throw Error("unsupported JSON value");
  }
}

// A JSON array or object being converted: its items so far and where its walk is.
struct JsonFrame {
  const nlohmann::ordered_json* node;
  nlohmann::ordered_json::const_iterator next;
  bool data;
  std::vector<Value> items;  // an array's
  Dict dict;                 // an object's
  Value key;                 // an object's member whose value is being converted
};

}  // namespace

// Iterative, with the containers being built on a heap stack: under a sanitizer, one native
// frame per level would exhaust a small thread stack before the depth limit is reached.
Value from_json(const nlohmann::ordered_json& j, bool data) {
  if (!j.is_structured()) return json_scalar(j, data);
  std::vector<JsonFrame> stack;
  stack.push_back({&j, j.cbegin(), data, {}, {}, {}});
  while (true) {
    JsonFrame& f = stack.back();
    if (f.next == f.node->cend()) {
      Value done = f.node->is_array() ? make_list(std::move(f.items)) : make_dict(std::move(f.dict));
      stack.pop_back();
      if (stack.empty()) return done;
      JsonFrame& parent = stack.back();
      if (parent.node->is_array()) {
        parent.items.push_back(std::move(done));
      } else {
        parent.dict.items.emplace_back(std::move(parent.key), std::move(done));
      }
      continue;
    }
    const nlohmann::ordered_json& e = *f.next;
    bool item_data = f.data;
    if (f.node->is_object()) {
      const std::string& k = f.next.key();
      f.key = f.data ? data_string(k) : Value(k);
      item_data = f.data && !(k == "role" && e.is_string() && is_known_role(e.get_ref<const std::string&>()));
    }
    ++f.next;
    if (e.is_structured()) {
      if (stack.size() >= size_t(kMaxJsonDepth)) {
        throw Error("template context nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
      }
      stack.push_back({&e, e.cbegin(), item_data, {}, {}, {}});  // `f` is not used past here
      continue;
    }
    Value scalar = json_scalar(e, item_data);
    if (f.node->is_array()) {
      f.items.push_back(std::move(scalar));
    } else {
      f.dict.items.emplace_back(std::move(f.key), std::move(scalar));
    }
  }
}

std::string dumps(const Value& v, const JsonStyle& style) {
  std::string out;
  dumps_into(out, v, style, 0);
  return out;
}

}  // namespace pagoda::jinja
