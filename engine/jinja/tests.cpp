// jinja2's tests (`x is name`), with its aliases.

#include <cmath>
#include <unordered_map>

#include "engine/jinja/arguments.h"
#include "engine/jinja/filters.h"
#include "engine/jinja/operators.h"
#include "engine/jinja/utf8.h"
#include "pagoda/error.h"

namespace pagoda::jinja {

namespace {

using TestFn = bool (*)(const Value& v, const std::vector<Value>& args);

const Value& arg(const std::vector<Value>& args, const char* test) {
  if (args.empty() || args[0].is_undefined()) throw Error(std::string("test '") + test + "' needs an argument");
  return args[0];
}

int64_t integer(const Value& v, const char* test) {
  if (v.is_float()) {
    const double d = std::get<double>(v.v);
    if (d != std::floor(d) || std::fabs(d) > 9e18) throw Error(std::string("test '") + test + "' needs a whole number");
    return static_cast<int64_t>(d);
  }
  if (!v.is_number()) {
    require_defined(v);
    throw Error(std::string("test '") + test + "': unsupported operand type " + type_name(v));
  }
  return as_int(v);
}

bool t_defined(const Value& v, const std::vector<Value>&) { return !v.is_undefined(); }
bool t_undefined(const Value& v, const std::vector<Value>&) { return v.is_undefined(); }
bool t_none(const Value& v, const std::vector<Value>&) { return v.is_none(); }
bool t_boolean(const Value& v, const std::vector<Value>&) { return v.is_bool(); }
bool t_true(const Value& v, const std::vector<Value>&) { return v.is_bool() && std::get<bool>(v.v); }
bool t_false(const Value& v, const std::vector<Value>&) { return v.is_bool() && !std::get<bool>(v.v); }
bool t_integer(const Value& v, const std::vector<Value>&) { return v.is_int(); }
bool t_float(const Value& v, const std::vector<Value>&) { return v.is_float(); }
bool t_number(const Value& v, const std::vector<Value>&) { return v.is_number(); }
bool t_string(const Value& v, const std::vector<Value>&) { return v.is_string(); }
bool t_mapping(const Value& v, const std::vector<Value>&) { return v.is_dict(); }
// Undefined has __len__ and __getitem__ and __iter__, so jinja2 counts it as both.
bool t_sequence(const Value& v, const std::vector<Value>&) {
  return v.is_string() || (v.is_list() && !v.list().generator) || v.is_dict() || v.is_undefined();
}
bool t_iterable(const Value& v, const std::vector<Value>&) {
  return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
}
bool t_callable(const Value& v, const std::vector<Value>&) { return v.is_function(); }
bool t_escaped(const Value& v, const std::vector<Value>&) { return v.markup; }
bool t_odd(const Value& v, const std::vector<Value>&) { return (integer(v, "odd") % 2 + 2) % 2 == 1; }
bool t_even(const Value& v, const std::vector<Value>&) { return integer(v, "even") % 2 == 0; }
bool t_divisibleby(const Value& v, const std::vector<Value>& a) {
  const int64_t d = integer(arg(a, "divisibleby"), "divisibleby");
  if (d == 0) throw Error("integer division or modulo by zero");
  return integer(v, "divisibleby") % d == 0;
}
// Python's str.islower / isupper: at least one cased character, and every cased one already in
// the case `to_case` gives.
bool all_cased_in_case(const Value& v, char32_t (*to_case)(char32_t)) {
  bool cased = false;
  for (char32_t c : utf8::decode(to_str(v))) {
    if (!utf8::is_cased(c)) continue;
    cased = true;
    if (to_case(c) != c) return false;
  }
  return cased;
}
bool t_lower(const Value& v, const std::vector<Value>&) { return all_cased_in_case(v, utf8::to_lower); }
bool t_upper(const Value& v, const std::vector<Value>&) { return all_cased_in_case(v, utf8::to_upper); }
bool t_in(const Value& v, const std::vector<Value>& a) { return contains(arg(a, "in"), v); }
bool t_eq(const Value& v, const std::vector<Value>& a) { return equals(v, a.empty() ? Value() : a[0]); }
bool t_ne(const Value& v, const std::vector<Value>& a) { return !equals(v, a.empty() ? Value() : a[0]); }
bool t_lt(const Value& v, const std::vector<Value>& a) { return compare(v, arg(a, "lt")) < 0; }
bool t_le(const Value& v, const std::vector<Value>& a) { return compare(v, arg(a, "le")) <= 0; }
bool t_gt(const Value& v, const std::vector<Value>& a) { return compare(v, arg(a, "gt")) > 0; }
bool t_ge(const Value& v, const std::vector<Value>& a) { return compare(v, arg(a, "ge")) >= 0; }
// Python's `is`: identity for containers, value for the immutable singletons and numbers.
bool t_sameas(const Value& v, const std::vector<Value>& a) {
  const Value& other = arg(a, "sameas");
  if (v.v.index() != other.v.index()) return false;
  if (v.is_list()) return std::get<ListPtr>(v.v) == std::get<ListPtr>(other.v);
  if (v.is_dict()) return std::get<DictPtr>(v.v) == std::get<DictPtr>(other.v);
  return equals(v, other);
}
bool t_filter(const Value& v, const std::vector<Value>&) { return v.is_string() && has_filter(v.str()); }
bool t_test(const Value& v, const std::vector<Value>&) { return v.is_string() && has_test(v.str()); }

const std::unordered_map<std::string, TestFn>& registry() {
  static const std::unordered_map<std::string, TestFn> tests = {
      {"defined", t_defined},
      {"undefined", t_undefined},
      {"none", t_none},
      {"boolean", t_boolean},
      {"true", t_true},
      {"false", t_false},
      {"integer", t_integer},
      {"float", t_float},
      {"number", t_number},
      {"string", t_string},
      {"mapping", t_mapping},
      {"sequence", t_sequence},
      {"iterable", t_iterable},
      {"callable", t_callable},
      {"escaped", t_escaped},
      {"odd", t_odd},
      {"even", t_even},
      {"divisibleby", t_divisibleby},
      {"lower", t_lower},
      {"upper", t_upper},
      {"in", t_in},
      {"eq", t_eq},
      {"equalto", t_eq},
      {"==", t_eq},
      {"ne", t_ne},
      {"!=", t_ne},
      {"lt", t_lt},
      {"lessthan", t_lt},
      {"<", t_lt},
      {"le", t_le},
      {"<=", t_le},
      {"gt", t_gt},
      {"greaterthan", t_gt},
      {">", t_gt},
      {"ge", t_ge},
      {">=", t_ge},
      {"sameas", t_sameas},
      {"filter", t_filter},
      {"test", t_test},
  };
  return tests;
}

}  // namespace

bool has_test(const std::string& name) { return registry().count(name) != 0; }

bool apply_test(const std::string& name, const Value& input, const Arguments& args, Budget& budget) {
  const auto it = registry().find(name);
  if (it == registry().end()) throw Error("no test named '" + name + "'");
  if (!args.keyword.empty()) throw Error("test '" + name + "' takes no keyword arguments");
  if (args.positional.size() > 1) throw Error("test '" + name + "' takes at most one argument");
  budget.step();
  return it->second(input, args.positional);
}

}  // namespace pagoda::jinja
