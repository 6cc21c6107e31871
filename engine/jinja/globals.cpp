#include "engine/jinja/globals.h"

#include <ctime>

#include "engine/jinja/arguments.h"
#include "engine/jinja/text_spans.h"
#include "pagoda/error.h"

namespace pagoda::jinja {

namespace {

// jinja2's sandbox refuses ranges longer than this (MAX_RANGE).
constexpr int64_t kMaxRange = 100000;

Value range(Arguments& a) {
  if (!a.keyword.empty()) throw Error("range() takes no keyword arguments");
  for (const Value& v : a.positional) {
    if (!v.is_int() && !v.is_bool()) {
      require_defined(v);
      throw Error("'" + type_name(v) + "' object cannot be interpreted as an integer");
    }
  }
  int64_t start = 0, stop = 0, step = 1;
  switch (a.positional.size()) {
    case 1: stop = as_int(a.positional[0]); break;
    case 2:
      start = as_int(a.positional[0]);
      stop = as_int(a.positional[1]);
      break;
    case 3:
      start = as_int(a.positional[0]);
      stop = as_int(a.positional[1]);
      step = as_int(a.positional[2]);
      break;
    default: throw Error("range expected 1 to 3 arguments, got " + std::to_string(a.positional.size()));
  }
  if (step == 0) throw Error("range() arg 3 must not be zero");
  // the count in 128-bit arithmetic, so that extreme bounds cannot overflow
  const __int128 span = step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  const __int128 magnitude = step > 0 ? step : -static_cast<__int128>(step);
  const __int128 count = span <= 0 ? 0 : (span + magnitude - 1) / magnitude;
  if (count > kMaxRange) throw Error("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  std::vector<Value> items;
  for (__int128 i = 0; i < count; ++i) items.emplace_back(static_cast<int64_t>(start + i * step));
  return make_list(std::move(items));
}

// dict(mapping, **kw) as Python builds it.
Dict dict_of(const Arguments& a, const char* callee) {
  if (a.positional.size() > 1) throw Error(std::string(callee) + " expected at most 1 argument");
  Dict d;
  if (!a.positional.empty()) {
    const Value& from = a.positional[0];
    if (from.is_dict()) {
      d = from.dict();
    } else {
      for (const Value& pair : iterate(from)) {
        if (!pair.is_list() || pair.list().items.size() != 2)
          throw Error(std::string(callee) + ": sequence elements must be pairs");
        d.set(pair.list().items[0], pair.list().items[1]);
      }
    }
  }
  for (size_t i = 0; i < a.keyword.size(); ++i) d.set(a.keyword_name(i), a.keyword[i].second);
  return d;
}

Value strftime_now(Arguments& a) {
  const auto p = bind_arguments("strftime_now", a, {"format"});
  if (!p[0].is_string()) throw Error("strftime_now() argument must be str");
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[512];
  const size_t n = std::strftime(buf, sizeof buf, p[0].str().c_str(), &local);
  if (n == 0 && !p[0].str().empty()) throw Error("strftime_now(): format too long");
  // A format from data prints its own text: the date is data then.
  return widen(Value(std::string(buf, n)), p[0]);
}

}  // namespace

void add_globals(Dict& globals) {
  globals.set(Value("range"), make_function("range", range));
  globals.set(Value("dict"), make_function("dict", [](Arguments& a) { return make_dict(dict_of(a, "dict")); }));
  globals.set(Value("namespace"), make_function("namespace", [](Arguments& a) {
                auto ns = std::make_shared<Namespace>();
                ns->attributes = dict_of(a, "namespace");
                return Value(std::move(ns));
              }));
  globals.set(Value("raise_exception"), make_function("raise_exception", [](Arguments& a) -> Value {
                const auto p = bind_arguments("raise_exception", a, {"message"});
                throw Error("raise_exception: " + to_str(p[0]));
              }));
  globals.set(Value("strftime_now"), make_function("strftime_now", strftime_now));
}

}  // namespace pagoda::jinja
