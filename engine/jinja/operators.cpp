// Python's operator semantics, down to floor division and modulo rounding towards negative
// infinity and `True + 1 == 2`.

#include "engine/jinja/operators.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>

#include "engine/jinja/strings.h"
#include "engine/jinja/text_spans.h"
#include "engine/jinja/utf8.h"
#include "pagoda/error.h"

namespace pagoda::jinja {

namespace {

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  require_defined(a);
  require_defined(b);
  throw Error("unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
}

// Throws when a __builtin_*_overflow reported an overflow.
void check_overflow(bool overflow) {
  if (overflow) throw Error("integer overflow");
}

Value repeat(const Value& seq, int64_t n, Budget& budget) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    budget.check_size(static_cast<size_t>(n) * seq.str().size());
    budget.step(static_cast<uint64_t>(n));
    TextBuilder out;
    for (int64_t i = 0; i < n; ++i) out.append(seq);
    return out.take();
  }
  const auto& items = seq.list().items;
  budget.check_size(static_cast<size_t>(n) * items.size());
  budget.step(static_cast<uint64_t>(n));
  std::vector<Value> out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  return make_list(std::move(out), seq.list().tuple);
}

int64_t floor_div(int64_t a, int64_t b) {
  if (a == std::numeric_limits<int64_t>::min() && b == -1) throw Error("integer overflow");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t int_pow(int64_t base, int64_t exp) {
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) check_overflow(__builtin_mul_overflow(result, base, &result));
    exp >>= 1;
    if (exp > 0) check_overflow(__builtin_mul_overflow(base, base, &base));
  }
  return result;
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (a.is_float() || b.is_float()) {
    const double x = as_double(a), y = as_double(b);
    if (op == "+") return Value(x + y);
    if (op == "-") return Value(x - y);
    if (op == "*") return Value(x * y);
    if ((op == "/" || op == "//" || op == "%") && y == 0.0) throw Error("float division by zero");
    if (op == "/") return Value(x / y);
    if (op == "//") return Value(std::floor(x / y));
    if (op == "%") {
      double m = std::fmod(x, y);
      if (m != 0.0 && ((m < 0) != (y < 0))) m += y;
      return Value(m);
    }
    if (x == 0.0 && y < 0) throw Error("0.0 cannot be raised to a negative power");
    return Value(std::pow(x, y));
  }
  const int64_t x = as_int(a), y = as_int(b);
  int64_t r = 0;
  if (op == "+" || op == "-" || op == "*") {
    check_overflow(op == "+"   ? __builtin_add_overflow(x, y, &r)
                   : op == "-" ? __builtin_sub_overflow(x, y, &r)
                               : __builtin_mul_overflow(x, y, &r));
    return Value(r);
  }
  if ((op == "/" || op == "//" || op == "%") && y == 0) throw Error("division by zero");
  if (op == "/") return Value(static_cast<double>(x) / static_cast<double>(y));
  if (op == "//") return Value(floor_div(x, y));
  if (op == "%") return Value(x - floor_div(x, y) * y);
  if (y < 0) {
    if (x == 0) throw Error("0.0 cannot be raised to a negative power");
    return Value(std::pow(static_cast<double>(x), static_cast<double>(y)));
  }
  return Value(int_pow(x, y));
}

std::optional<int64_t> normalize_index(int64_t i, int64_t n) {
  if (i < 0) i += n;
  if (i < 0 || i >= n) return std::nullopt;
  return i;
}

}  // namespace

Value binary_op(const std::string& op, const Value& a, const Value& b, Budget& budget) {
  if (op == "~") {
    const Value s = to_text(a);
    const Value t = to_text(b);
    budget.check_size(s.str().size() + t.str().size());
    TextBuilder out;
    out.reserve(s.str().size() + t.str().size());
    out.append(s);
    out.append(t);
    return out.take();
  }
  if (op == "%" && a.is_string()) {
    Value s = percent_format(a, b);
    budget.check_size(s.str().size());
    return s;
  }
  if (a.is_number() && b.is_number()) return arithmetic(op, a, b);
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      budget.check_size(a.str().size() + b.str().size());
      if (a.markup == b.markup) {
        TextBuilder sum;
        sum.reserve(a.str().size() + b.str().size());
        sum.append(a);
        sum.append(b);
        return sum.take(a.markup);
      }
      // Markup + str escapes the str, and so does str + Markup
      std::string joined =
          (a.markup ? a.str() : strings::html_escape(a.str())) + (b.markup ? b.str() : strings::html_escape(b.str()));
      budget.check_size(joined.size());
      Value m = widen(Value(std::move(joined)), a);
      m = widen(std::move(m), b);
      m.markup = true;
      return m;
    }
    if (a.is_list() && b.is_list() && a.list().tuple == b.list().tuple && !a.list().generator && !b.list().generator) {
      budget.check_size(a.list().items.size() + b.list().items.size());
      std::vector<Value> items = a.list().items;
      items.insert(items.end(), b.list().items.begin(), b.list().items.end());
      return make_list(std::move(items), a.list().tuple);
    }
    if (a.is_string() && !b.is_undefined() && !b.is_string()) {
      throw Error("can only concatenate str (not \"" + type_name(b) + "\") to str");
    }
  }
  if (op == "*") {
    auto repeatable = [](const Value& v) { return v.is_string() || (v.is_list() && !v.list().generator); };
    if (repeatable(a) && (b.is_int() || b.is_bool())) return repeat(a, as_int(b), budget);
    if (repeatable(b) && (a.is_int() || a.is_bool())) return repeat(b, as_int(a), budget);
  }
  unsupported(op, a, b);
}

bool contains(const Value& container, const Value& item) {
  if (container.is_string()) {
    if (!item.is_string()) {
      require_defined(item);
      throw Error("'in <string>' requires string as left operand, not " + type_name(item));
    }
    return container.str().find(item.str()) != std::string::npos;
  }
  if (container.is_list()) {
    for (const Value& v : container.list().items) {
      if (equals(v, item)) return true;
    }
    return false;
  }
  if (container.is_dict()) return container.dict().find(item) != nullptr;
  if (container.is_undefined()) return false;
  throw Error("argument of type '" + type_name(container) + "' is not iterable");
}

bool compare_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return equals(a, b);
  if (op == "!=") return !equals(a, b);
  if (op == "in") return contains(b, a);
  if (op == "notin") return !contains(b, a);
  const int c = compare(a, b);
  if (op == "<") return c < 0;
  if (op == ">") return c > 0;
  if (op == "<=") return c <= 0;
  return c >= 0;
}

Value unary_op(const std::string& op, const Value& a) {
  if (!a.is_number()) {
    require_defined(a);
    throw Error("bad operand type for unary " + op + ": '" + type_name(a) + "'");
  }
  if (op == "+") return a.is_bool() ? Value(as_int(a)) : a;
  if (a.is_float()) return Value(-std::get<double>(a.v));
  const int64_t x = as_int(a);
  if (x == std::numeric_limits<int64_t>::min()) throw Error("integer overflow");
  return Value(-x);
}

Value slice(const Value& v, std::optional<int64_t> start, std::optional<int64_t> stop, std::optional<int64_t> step) {
  const int64_t st = step.value_or(1);
  if (st == 0) throw Error("slice step cannot be zero");
  std::u32string chars;
  const bool is_string = v.is_string();
  if (is_string) {
    chars = utf8::decode(v.str());
  } else if (!v.is_list() || v.list().generator) {
    require_defined(v);
    throw Error("'" + type_name(v) + "' object is not subscriptable");
  }
  const int64_t n = is_string ? static_cast<int64_t>(chars.size()) : static_cast<int64_t>(v.list().items.size());
  // Python's PySlice_AdjustIndices
  auto adjust = [&](std::optional<int64_t> bound, int64_t fallback) {
    if (!bound) return fallback;
    int64_t i = *bound;
    if (i < 0) {
      i += n;
      if (i < 0) i = st < 0 ? -1 : 0;
    } else if (i >= n) {
      i = st < 0 ? n - 1 : n;
    }
    return i;
  };
  const int64_t lo = adjust(start, st < 0 ? n - 1 : 0);
  const int64_t hi = adjust(stop, st < 0 ? -1 : n);
  std::vector<int64_t> picked;
  for (int64_t i = lo; st > 0 ? i < hi : i > hi; i += st) picked.push_back(i);
  if (is_string) {
    std::u32string out;
    for (int64_t i : picked) out.push_back(chars[static_cast<size_t>(i)]);
    std::string text = utf8::encode(out);
    if (!spans_of(v)) return Value(std::move(text));
    // A forward slice of valid UTF-8 is one run of the string's bytes: it keeps their ranges.
    if (st == 1 && !picked.empty()) {
      const size_t begin =
          utf8::encode(std::u32string_view(chars).substr(0, static_cast<size_t>(picked.front()))).size();
      if (v.str().compare(begin, text.size(), text) == 0) return substring(v, begin, begin + text.size());
    }
    return widen(Value(std::move(text)), v);
  }
  std::vector<Value> out;
  for (int64_t i : picked) out.push_back(v.list().items[static_cast<size_t>(i)]);
  return make_list(std::move(out), v.list().tuple);
}

std::optional<Value> index(const Value& v, int64_t i) {
  if (v.is_list() && !v.list().generator) {
    const auto at = normalize_index(i, static_cast<int64_t>(v.list().items.size()));
    if (!at) return std::nullopt;
    return v.list().items[static_cast<size_t>(*at)];
  }
  if (v.is_string()) {
    const std::u32string chars = utf8::decode(v.str());
    const auto at = normalize_index(i, static_cast<int64_t>(chars.size()));
    if (!at) return std::nullopt;
    std::string ch = utf8::encode(chars.substr(static_cast<size_t>(*at), 1));
    if (!spans_of(v)) return Value(std::move(ch));
    const size_t begin = utf8::encode(std::u32string_view(chars).substr(0, static_cast<size_t>(*at))).size();
    if (v.str().compare(begin, ch.size(), ch) == 0) return substring(v, begin, begin + ch.size());
    return widen(Value(std::move(ch)), v);
  }
  return std::nullopt;
}

Value percent_format(const Value& format_value, const Value& args) {
  const std::string& format = format_value.str();
  std::vector<Value> positional;
  if (args.is_list() && args.list().tuple) {
    positional = args.list().items;
  } else {
    positional.push_back(args);
  }
  size_t next_arg = 0;
  TextBuilder out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      const size_t literal_end = std::min(format.find('%', i), format.size());
      out.append(format_value, i, literal_end);
      i = literal_end - 1;
      continue;
    }
    if (++i >= format.size()) throw Error("incomplete format");
    std::string key;
    if (format[i] == '(') {
      const size_t close = format.find(')', i);
      if (close == std::string::npos) throw Error("incomplete format key");
      key = format.substr(i + 1, close - i - 1);
      i = close + 1;
    }
    std::string spec = "%";
    while (i < format.size() && std::string("-+ #0").find(format[i]) != std::string::npos) spec.push_back(format[i++]);
    while (i < format.size() && (std::isdigit(static_cast<unsigned char>(format[i])) || format[i] == '.'))
      spec.push_back(format[i++]);
    if (i >= format.size()) throw Error("incomplete format");
    const char conv = format[i];
    if (conv == '%') {
      out.append(format_value, i, i + 1);
      continue;
    }
    Value arg;
    if (!key.empty()) {
      if (!args.is_dict()) throw Error("format requires a mapping");
      const Value* found = args.dict().find(Value(key));
      if (!found) throw Error("KeyError: '" + key + "'");
      arg = *found;
    } else {
      if (next_arg >= positional.size()) throw Error("not enough arguments for format string");
      arg = positional[next_arg++];
    }
    char buf[512];
    switch (conv) {
      case 's':
      case 'r': {
        spec.push_back('s');
        if (spec == "%s" && conv == 's') {
          out.append(to_text(arg));
          break;
        }
        // repr or padding: what is printed cannot be mapped back to the argument's bytes.
        const std::string text = conv == 's' ? to_str(arg) : repr(arg);
        std::string printed = text;
        if (spec != "%s") {
          std::snprintf(buf, sizeof buf, spec.c_str(), text.c_str());
          printed = buf;
        }
        if (spans_of(widen(Value(printed), arg))) {
          out.append_data(printed);
        } else {
          out.append_plain(printed);
        }
        break;
      }
      case 'd':
      case 'i':
      case 'x':
      case 'X':
      case 'o':
        if (!arg.is_number())
          throw Error("%" + std::string(1, conv) + " format: a number is required, not " + type_name(arg));
        spec += std::string("ll") + (conv == 'i' ? 'd' : conv);
        std::snprintf(buf, sizeof buf, spec.c_str(), static_cast<long long>(as_int(arg)));
        out.append_plain(buf);
        break;
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G':
        if (!arg.is_number()) throw Error("must be real number, not " + type_name(arg));
        spec.push_back(conv);
        std::snprintf(buf, sizeof buf, spec.c_str(), as_double(arg));
        out.append_plain(buf);
        break;
      default: throw Error(std::string("unsupported format character '") + conv + "'");
    }
  }
  if (!args.is_dict() && next_arg < positional.size())
    throw Error("not all arguments converted during string formatting");
  return out.take();
}

}  // namespace pagoda::jinja
