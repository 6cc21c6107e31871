// Numbers, strings and arrays: bounds, lengths, patterns, formats, prefix items.

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/grammar/gbnf_text.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/json_schema_compiler.h"
#include "engine/grammar/json_schema_formats.h"
#include "engine/grammar/json_schema_numbers.h"
#include "engine/grammar/json_schema_regex.h"
#include "pagoda/error.h"

namespace pagoda::grammar {

JsonSchemaCompiler::Bound JsonSchemaCompiler::bound(const json& s, const char* inclusive_key, const char* exclusive_key,
                                                    bool lower, const std::string& path) const {
  Bound b;
  if (s.contains(inclusive_key)) {
    if (!s[inclusive_key].is_number()) fail(child_path(path, inclusive_key), "must be a number");
    b.value = &s[inclusive_key];
  }
  if (s.contains(exclusive_key)) {
    const json& e = s[exclusive_key];
    if (e.is_boolean()) {
      if (e.get<bool>() && !b.value)
        fail(child_path(path, exclusive_key), "true without '" + std::string(inclusive_key) + "'");
      b.exclusive = e.get<bool>();
    } else if (e.is_number()) {
      if (!b.value || (lower ? e >= *b.value : e <= *b.value)) b = {&e, true};
    } else {
      fail(child_path(path, exclusive_key), "must be a number");
    }
  }
  return b;
}

std::string JsonSchemaCompiler::integer_body(const json& s, const std::string& path) {
  const Bound lo_b = bound(s, "minimum", "exclusiveMinimum", true, path),
              hi_b = bound(s, "maximum", "exclusiveMaximum", false, path);
  if (!lo_b.value && !hi_b.value) return primitive("integer");
  // Smallest integer above the lower bound, largest below the upper; exact for integers.
  auto limit = [](const Bound& b, bool lower) {
    const auto max = double(kMaxIntegerMagnitude);
    if (b.value->is_number_integer()) {
      const double v = b.value->get<double>();
      if (v > max || v < -max) return std::clamp(v, -max, max) > 0 ? kMaxIntegerMagnitude : -kMaxIntegerMagnitude;
      const int64_t n = b.value->is_number_unsigned() ? int64_t(b.value->get<uint64_t>()) : b.value->get<int64_t>();
      return b.exclusive ? (lower ? n + 1 : n - 1) : n;
    }
    const double v = b.value->get<double>();
    const double r =
        lower ? (b.exclusive ? std::floor(v) + 1 : std::ceil(v)) : (b.exclusive ? std::ceil(v) - 1 : std::floor(v));
    return int64_t(std::clamp(r, -max, max));
  };
  int64_t hi = hi_b.value ? limit(hi_b, false) : 0, lo = lo_b.value ? limit(lo_b, true) : 0;
  if (!lo_b.value) lo = hi < -kUnboundedIntegerMagnitude ? -kMaxIntegerMagnitude : -kUnboundedIntegerMagnitude;
  if (!hi_b.value) hi = lo > kUnboundedIntegerMagnitude ? kMaxIntegerMagnitude : kUnboundedIntegerMagnitude;
  if (lo > hi) fail(path, "no integer satisfies the bounds");
  return integer_range_gbnf(lo, hi);
}

std::string JsonSchemaCompiler::number_body(const json& s, const std::string& path) {
  const Bound lo_b = bound(s, "minimum", "exclusiveMinimum", true, path),
              hi_b = bound(s, "maximum", "exclusiveMaximum", false, path);
  if (!lo_b.value && !hi_b.value) return primitive("number");
  const double inf = std::numeric_limits<double>::infinity();
  std::string body = number_range_gbnf(lo_b.value ? lo_b.value->get<double>() : -inf, lo_b.exclusive,
                                       hi_b.value ? hi_b.value->get<double>() : inf, hi_b.exclusive);
  if (body.empty())
    fail(path, "no number pagoda can write satisfies the bounds (number bounds are kept at integer granularity)");
  return body;
}

std::string JsonSchemaCompiler::string_body(const json& s, const std::string& path) {
  const size_t min = count(s, "minLength", path, 0), max = count(s, "maxLength", path, kUnbounded);
  if (max != kUnbounded && min > max) fail(path, "minLength above maxLength");
  const bool has_length = s.contains("minLength") || s.contains("maxLength");
  const std::string quote = R"("\"")";
  if (s.contains("pattern")) {
    const std::string pattern_path = child_path(path, "pattern");
    if (!s["pattern"].is_string()) fail(pattern_path, "must be a string");
    // With a pattern, a format is the annotation JSON Schema 2020-12 makes it, as llama.cpp and
    // xgrammar read it: zod writes both for z.email(), z.uuid(), z.iso.datetime(), ... (its
    // pattern the stricter of the two), and the pattern is what the text must match.
    if (has_length) fail(pattern_path, "a pattern together with a length is not supported");
    try {
      return quote + " " +
             regex_to_gbnf(s["pattern"].get<std::string>(), primitive("char"), kSchemaMaxRepetition, budget_) + " " +
             quote;
    } catch (const Error& e) {
      fail(pattern_path, e.what());
    }
  }
  if (s.contains("format")) {
    if (!s["format"].is_string()) fail(child_path(path, "format"), "must be a string");
    const std::string format = string_format_gbnf(s["format"].get<std::string>());
    if (!format.empty()) {
      if (has_length) fail(child_path(path, "format"), "a format together with a length is not supported");
      return quote + " " + format + " " + quote;
    }
  }
  if (!has_length) return primitive("string");
  take_repetition(min, max, path);
  return quote + " " + gbnf_repeat(primitive("char"), min, max) + " " + quote;
}

std::string JsonSchemaCompiler::array_body(const json& s, const std::string& local, const std::string& path,
                                           size_t depth) {
  std::vector<std::string> prefix;
  const json* rest = nullptr;  // schema of the items after the prefix; null: none allowed
  const json any = true;
  auto read_prefix = [&](const json& items, const std::string& items_path) {
    if (items.size() > kSchemaMaxRepetition)
      fail(items_path, "more than " + std::to_string(kSchemaMaxRepetition) + " items");
    for (size_t i = 0; i < items.size(); ++i) {
      prefix.push_back(compile(items[i], join_local(local, "item-" + std::to_string(i + 1)),
                               child_path(items_path, std::to_string(i)), depth + 1));
    }
  };
  if (s.contains("prefixItems")) {
    if (!s["prefixItems"].is_array()) fail(child_path(path, "prefixItems"), "must be an array");
    read_prefix(s["prefixItems"], child_path(path, "prefixItems"));
    rest = s.contains("items") ? &s["items"] : &any;
  } else if (s.contains("items") && s["items"].is_array()) {
    read_prefix(s["items"], child_path(path, "items"));
    rest = s.contains("additionalItems") ? &s["additionalItems"] : &any;
  } else {
    rest = s.contains("items") ? &s["items"] : &any;
  }
  if (rest->is_boolean() && !rest->get<bool>()) rest = nullptr;
  const size_t k = prefix.size();
  size_t lo = count(s, "minItems", path, 0), hi = count(s, "maxItems", path, kUnbounded);
  if (!rest) hi = std::min(hi, k);
  if (hi != kUnbounded && lo > hi) fail(path, "no array length satisfies minItems, maxItems and the items allowed");
  // uniqueItems cannot be written as a context-free rule; it is read but not enforced (as
  // llama.cpp does), since refusing it would refuse every schema of a set-valued field.
  if (s.contains("uniqueItems") && !s["uniqueItems"].is_boolean())
    fail(child_path(path, "uniqueItems"), "must be a boolean");
  const std::string sp = space(), sep = sp + " \",\" " + sp;
  // From the end: what follows element i (i elements written so far).
  std::string tail;
  if (rest && hi > k) {
    const std::string item = compile(
        *rest, join_local(local, "item"),
        child_path(path, s.contains("prefixItems") || k > 0 ? (s.contains("prefixItems") ? "items" : "additionalItems")
                                                            : "items"),
        depth + 1);
    const size_t r_lo = lo > k ? lo - k : 0, r_hi = hi == kUnbounded ? kUnbounded : hi - k;
    take_repetition(r_lo, r_hi, path);
    if (k > 0) {
      tail = gbnf_repeat("(" + sep + " " + item + ")", r_lo, r_hi);
    } else {
      tail = sp + " " + item;
      const std::string more = gbnf_repeat("(" + sep + " " + item + ")", r_lo > 0 ? r_lo - 1 : 0,
                                           r_hi == kUnbounded ? kUnbounded : r_hi - 1);
      if (!more.empty()) tail += " " + more;
      if (r_lo == 0) tail = "(" + tail + ")?";
    }
  }
  for (size_t i = std::min(k, hi); i-- > 0;) {
    std::string element = (i == 0 ? sp : sep) + " " + prefix[i] + (tail.empty() ? "" : " " + tail);
    tail = i >= lo ? "(" + element + ")?" : element;
  }
  return "\"[\" " + (tail.empty() ? "" : tail + " ") + sp + " \"]\"";
}

}  // namespace pagoda::grammar
