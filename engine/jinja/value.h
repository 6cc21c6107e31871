#pragma once
// The values a chat template computes with, modelled on the Python objects jinja2 hands its
// templates: None, bool, int, float, str, list, tuple, dict (insertion-ordered), namespace(),
// callables, and jinja2's Undefined. Lists, dicts and namespaces are shared by reference as in
// Python, so `{% set ns.items = ... %}` is seen through every name bound to the namespace.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "pagoda/chat.h"

namespace pagoda::jinja {

struct Value;

// What a missing name, key or attribute evaluates to. Printing it gives "", iterating it gives
// nothing and it is falsy; anything else (an attribute, a call, arithmetic) is an error that
// says what was missing.
struct Undefined {
  std::string hint;  // jinja2's wording: "'x' is undefined", "'dict object' has no attribute 'y'"
};

struct None {};

struct List {
  std::vector<Value> items;
  bool tuple = false;  // Python tuple: printed with parentheses
  // What jinja2's map/select/unique/... filters return: a Python generator, which has no len(),
  // is always true, prints as an object and can only be iterated.
  bool generator = false;
  int depth = 1;  // levels of containers, this one included (see kMaxValueDepth)
};

struct Dict {
  std::vector<std::pair<Value, Value>> items;  // in insertion order, as Python's dict keeps them
  int depth = 1;  // levels of containers, this one included; set() keeps it (see kMaxValueDepth)
  const Value* find(const Value& key) const;
  void set(const Value& key, Value value);
};

// namespace(): attributes that templates may assign from inside loops.
struct Namespace {
  Dict attributes;
};

struct Arguments {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // Keyword names spread from a dict whose keys are data (`**d`), by index into `keyword`, so
  // that a macro's kwargs and dict(**d) give the keys back as data.
  std::vector<std::pair<size_t, Value>> data_keywords;
  // Keyword i's name as a string value (data when it came from a data key).
  Value keyword_name(size_t i) const;
};

struct Function {
  std::string name;
  std::function<Value(Arguments&)> call;
};

// Byte ranges of a string that came from the chat's data (see text_spans.h).
using Span = TextSpan;
using Spans = std::vector<Span>;

using ListPtr = std::shared_ptr<List>;
using DictPtr = std::shared_ptr<Dict>;
using NamespacePtr = std::shared_ptr<Namespace>;
using FunctionPtr = std::shared_ptr<Function>;

struct Value {
  std::variant<Undefined, None, bool, int64_t, double, std::string, ListPtr, DictPtr, NamespacePtr, FunctionPtr> v;
  // A string marked safe (markupsafe's Markup, from |safe or |escape): a str added to it is
  // HTML-escaped first, as jinja2 does even with autoescape off.
  bool markup = false;
  // A string's bytes that are message data, sorted and disjoint; null for most strings (all
  // of the template's own text), so untainted strings cost one pointer.
  std::shared_ptr<const Spans> spans;

  Value() = default;
  Value(Undefined u) : v(std::move(u)) {}
  Value(None) : v(None{}) {}
  Value(bool b) : v(b) {}
  Value(int64_t i) : v(i) {}
  Value(int i) : v(int64_t(i)) {}
  Value(double d) : v(d) {}
  Value(std::string s) : v(std::move(s)) {}
  Value(const char* s) : v(std::string(s)) {}
  Value(ListPtr l) : v(std::move(l)) {}
  Value(DictPtr d) : v(std::move(d)) {}
  Value(NamespacePtr n) : v(std::move(n)) {}
  Value(FunctionPtr f) : v(std::move(f)) {}

  bool is_undefined() const { return std::holds_alternative<Undefined>(v); }
  bool is_none() const { return std::holds_alternative<None>(v); }
  bool is_bool() const { return std::holds_alternative<bool>(v); }
  bool is_int() const { return std::holds_alternative<int64_t>(v); }  // not bool
  bool is_float() const { return std::holds_alternative<double>(v); }
  bool is_number() const { return is_bool() || is_int() || is_float(); }  // Python: bool is an int
  bool is_string() const { return std::holds_alternative<std::string>(v); }
  bool is_list() const { return std::holds_alternative<ListPtr>(v); }  // list or tuple
  bool is_dict() const { return std::holds_alternative<DictPtr>(v); }
  bool is_namespace() const { return std::holds_alternative<NamespacePtr>(v); }
  bool is_function() const { return std::holds_alternative<FunctionPtr>(v); }

  const std::string& str() const { return std::get<std::string>(v); }
  const List& list() const { return *std::get<ListPtr>(v); }
  List& list() { return *std::get<ListPtr>(v); }
  const Dict& dict() const { return *std::get<DictPtr>(v); }
  Dict& dict() { return *std::get<DictPtr>(v); }
};

// Values nesting containers deeper than this are refused where they are built (a pagoda::Error
// naming the limit): printing, comparing and destroying them recurse.
constexpr int kMaxValueDepth = 256;

// Levels of containers in `v` (0 for a scalar); namespaces count as containers.
int nesting(const Value& v);

Value make_list(std::vector<Value> items, bool tuple = false);
Value make_generator(std::vector<Value> items);
Value make_dict(Dict d = {});
Value make_markup(std::string s);
Value make_function(std::string name, std::function<Value(Arguments&)> call);

// Python's type name ("str", "int", "list", "dict", "NoneType", ...), for error messages.
std::string type_name(const Value& v);
// "'dict object'", as jinja2 names an object in "has no attribute" messages.
std::string object_name(const Value& v);

// Throws the Undefined's own error when v is undefined (using it as a value is an error).
void require_defined(const Value& v);

bool truthy(const Value& v);
std::string to_str(const Value& v);           // Python str(): what {{ v }} prints
std::string repr(const Value& v);             // Python repr(): how containers print their items
bool equals(const Value& a, const Value& b);  // Python ==: 1 == 1.0 == True
// Python's ordering (<0, 0, >0) for numbers, strings and sequences; other pairs are an error
// naming both types, as Python's TypeError does.
int compare(const Value& a, const Value& b);
// The number as a double, for arithmetic mixing ints and floats.
double as_double(const Value& v);
// bool and int as int64_t.
int64_t as_int(const Value& v);

// The items a for loop over `v` visits: a list's items, a dict's keys, a string's characters,
// nothing for Undefined; other values are an error ("'int' object is not iterable").
std::vector<Value> iterate(const Value& v);
// Python's len(): code points of a string, items of a list or dict; 0 for Undefined.
int64_t length(const Value& v);

// Python's repr of a float: shortest round-trip digits, "1.0", "1e+20", "inf", "nan".
std::string float_repr(double d);

// Containers nested deeper than this in a context are refused (a pagoda::Error naming the
// limit) rather than recursed into.
constexpr int kMaxJsonDepth = 128;

// The value of a JSON document as json.loads gives it to jinja2 (objects keep their key order).
// With `data`, every string in it (keys too) is message data throughout, except the value of a
// "role" key that names a chat role ("system", "user", "assistant", "tool", "developer",
// "function", "ipython"): templates build control tokens around those.
Value from_json(const nlohmann::ordered_json& j, bool data = false);
// How json.dumps(..., ensure_ascii=False) is asked to print: `indent` is the unit of one level
// (nullopt: everything on one line); the separators are already resolved (Python's defaults are
// ", " and ": " without indent, "," and ": " with it).
struct JsonStyle {
  std::optional<std::string> indent;
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};
std::string dumps(const Value& v, const JsonStyle& style);

}  // namespace pagoda::jinja
