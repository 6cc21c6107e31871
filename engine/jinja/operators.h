#pragma once
// Python's operators on template values: arithmetic (ints are 64-bit; overflow is an error
// rather than a big int), string and list concatenation and repetition, printf-style `%`
// formatting, `in`, comparisons, and subscripts and slices.

#include <optional>
#include <string>

#include "engine/jinja/budget.h"
#include "engine/jinja/value.h"

namespace pagoda::jinja {

// `op` is one of + - * / // % ** ~.
Value binary_op(const std::string& op, const Value& a, const Value& b, Budget& budget);
// `op` is one of == != < > <= >= in notin.
bool compare_op(const std::string& op, const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);
// `op` is "-" or "+".
Value unary_op(const std::string& op, const Value& a);

// Python's slice of a list, tuple or string; absent bounds are nullopt.
Value slice(const Value& v, std::optional<int64_t> start, std::optional<int64_t> stop, std::optional<int64_t> step);
// `v[index]` for an integer index (negative counts from the end); nullopt when out of range.
std::optional<Value> index(const Value& v, int64_t i);

// Python's `format % args` for str; the format's text and %s arguments keep their data ranges,
// other conversions of data are data whole.
Value percent_format(const Value& format, const Value& args);

}  // namespace pagoda::jinja
