// The filters over sequences and mappings: length, first/last, list, items, join, map,
// select/reject(attr), sort, unique, dictsort, reverse, min/max, sum, batch, slice.

#include <algorithm>

#include "engine/jinja/arguments.h"
#include "engine/jinja/filters.h"
#include "engine/jinja/methods.h"
#include "engine/jinja/operators.h"
#include "engine/jinja/text_spans.h"
#include "engine/jinja/utf8.h"
#include "pagoda/error.h"

namespace pagoda::jinja {

namespace {

// Items of an iterable, with one budget step each.
std::vector<Value> items_of(const Value& v, Budget& budget) {
  std::vector<Value> items = iterate(v);
  budget.step(items.size());
  return items;
}

// jinja2's ignore_case: sort and compare strings by their lower case.
Value fold_case(const Value& v, bool case_sensitive) {
  if (case_sensitive || !v.is_string()) return v;
  return Value(utf8::lower(v.str()));
}

// The key make_attrgetter/make_multi_attrgetter compute: the item itself, one attribute path,
// or a list of paths given as "a,b".
Value sort_key(const Value& item, const Value& attribute, bool case_sensitive, Budget& budget) {
  if (attribute.is_undefined() || attribute.is_none()) return fold_case(item, case_sensitive);
  if (!attribute.is_string()) return fold_case(get_item(item, attribute, budget), case_sensitive);
  const std::string& path = attribute.str();
  if (path.find(',') == std::string::npos) return fold_case(get_path(item, path, budget), case_sensitive);
  std::vector<Value> parts;
  size_t start = 0;
  while (true) {
    const size_t comma = path.find(',', start);
    parts.push_back(fold_case(get_path(item, path.substr(start, comma - start), budget), case_sensitive));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return make_list(std::move(parts));
}

Value f_length(const Value& v, const Arguments& a, Budget&) {
  bind_arguments("length", a, {});
  return Value(length(v));
}

Value f_first(const Value& v, const Arguments& a, Budget& budget) {
  bind_arguments("first", a, {});
  std::vector<Value> items = items_of(v, budget);
  if (items.empty()) return Value(Undefined{"No first item, sequence was empty."});
  return items.front();
}

Value f_last(const Value& v, const Arguments& a, Budget& budget) {
  bind_arguments("last", a, {});
  if (v.is_list() && v.list().generator) throw Error("'generator' object is not reversible");
  std::vector<Value> items = items_of(v, budget);
  if (items.empty()) return Value(Undefined{"No last item, sequence was empty."});
  return items.back();
}

Value f_list(const Value& v, const Arguments& a, Budget& budget) {
  bind_arguments("list", a, {});
  return make_list(items_of(v, budget));
}

Value f_items(const Value& v, const Arguments& a, Budget& budget) {
  bind_arguments("items", a, {});
  if (v.is_undefined()) return make_generator({});
  if (!v.is_dict()) throw Error("Can only get item pairs from a mapping.");
  std::vector<Value> pairs;
  for (const auto& [k, val] : v.dict().items) pairs.push_back(make_list({k, val}, true));
  budget.step(pairs.size());
  return make_generator(std::move(pairs));
}

Value f_join(const Value& v, const Arguments& a, Budget& budget) {
  const auto p = bind_arguments("join", a, {"d", "attribute"});
  const Value sep = p[0].is_undefined() ? Value("") : to_text(p[0]);
  TextBuilder out;
  bool first = true;
  for (const Value& item : items_of(v, budget)) {
    if (!first) out.append(sep);
    first = false;
    out.append(to_text(p[1].is_undefined() || p[1].is_none() ? item : get_path(item, to_str(p[1]), budget)));
    budget.check_size(out.size());
  }
  return out.take();
}

Value f_map(const Value& v, const Arguments& a, Budget& budget) {
  std::vector<Value> out;
  if (!truthy(v)) return make_generator({});  // jinja2 maps only a true sequence (None gives nothing)
  if (a.positional.empty()) {
    Value attribute, fallback(None{});
    for (const auto& [k, val] : a.keyword) {
      if (k == "attribute") attribute = val;
      else if (k == "default") fallback = val;
      else throw Error("Unexpected keyword argument '" + k + "'");
    }
    if (attribute.is_undefined()) throw Error("map requires a filter argument");
    for (const Value& item : items_of(v, budget)) {
      Value got = attribute.is_string() ? get_path(item, attribute.str(), budget) : get_item(item, attribute, budget);
      out.push_back(got.is_undefined() && !fallback.is_none() ? fallback : got);
    }
    return make_generator(std::move(out));
  }
  const std::string filter = to_str(a.positional[0]);
  Arguments rest{{a.positional.begin() + 1, a.positional.end()}, a.keyword};
  for (const Value& item : items_of(v, budget)) out.push_back(apply_filter(filter, item, rest, budget));
  return make_generator(std::move(out));
}

// select/reject (by_attribute false) and selectattr/rejectattr (true).
Value select(const Value& v, const Arguments& a, Budget& budget, bool by_attribute, bool keep_when) {
  size_t next = 0;
  Value attribute;
  if (by_attribute) {
    if (a.positional.empty()) throw Error("Missing parameter for attribute name");
    attribute = a.positional[next++];
  }
  std::string test;
  const bool has_test = next < a.positional.size();
  if (has_test) test = to_str(a.positional[next++]);
  Arguments rest{{a.positional.begin() + static_cast<std::ptrdiff_t>(next), a.positional.end()}, a.keyword};
  std::vector<Value> out;
  if (!truthy(v)) return make_generator({});  // as jinja2's select_or_reject: None selects nothing
  for (const Value& item : items_of(v, budget)) {
    const Value subject = by_attribute ? (attribute.is_string() ? get_path(item, attribute.str(), budget)
                                                                : get_item(item, attribute, budget))
                                       : item;
    const bool passed = has_test ? apply_test(test, subject, rest, budget) : truthy(subject);
    if (passed == keep_when) out.push_back(item);
  }
  return make_generator(std::move(out));
}

Value f_select(const Value& v, const Arguments& a, Budget& b) { return select(v, a, b, false, true); }
Value f_reject(const Value& v, const Arguments& a, Budget& b) { return select(v, a, b, false, false); }
Value f_selectattr(const Value& v, const Arguments& a, Budget& b) { return select(v, a, b, true, true); }
Value f_rejectattr(const Value& v, const Arguments& a, Budget& b) { return select(v, a, b, true, false); }

void stable_sort_by(std::vector<Value>& items, std::vector<Value>& keys, bool reverse) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return reverse ? compare(keys[y], keys[x]) < 0 : compare(keys[x], keys[y]) < 0;
  });
  std::vector<Value> sorted;
  for (size_t i : order) sorted.push_back(items[i]);
  items = std::move(sorted);
}

Value f_sort(const Value& v, const Arguments& a, Budget& budget) {
  const auto p = bind_arguments("sort", a, {"reverse", "case_sensitive", "attribute"});
  std::vector<Value> items = items_of(v, budget);
  std::vector<Value> keys;
  for (const Value& item : items) keys.push_back(sort_key(item, p[2], truthy(p[1]), budget));
  budget.step(items.size() * 16);  // n log n comparisons, roughly
  stable_sort_by(items, keys, truthy(p[0]));
  return make_list(std::move(items));
}

Value f_dictsort(const Value& v, const Arguments& a, Budget& budget) {
  const auto p = bind_arguments("dictsort", a, {"case_sensitive", "by", "reverse"});
  if (!v.is_dict()) {
    require_defined(v);
    throw Error("dictsort: a mapping is required, not " + type_name(v));
  }
  const std::string by = p[1].is_undefined() ? "key" : to_str(p[1]);
  if (by != "key" && by != "value") throw Error("You can only sort by either \"key\" or \"value\"");
  std::vector<Value> items, keys;
  for (const auto& [k, val] : v.dict().items) {
    items.push_back(make_list({k, val}, true));
    keys.push_back(fold_case(by == "key" ? k : val, truthy(p[0])));
  }
  budget.step(items.size() * 16);
  stable_sort_by(items, keys, truthy(p[2]));
  return make_list(std::move(items));
}

Value f_unique(const Value& v, const Arguments& a, Budget& budget) {
  const auto p = bind_arguments("unique", a, {"case_sensitive", "attribute"});
  std::vector<Value> out, seen;
  for (const Value& item : items_of(v, budget)) {
    const Value key = sort_key(item, p[1], truthy(p[0]), budget);
    budget.step(seen.size());
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, key); })) continue;
    seen.push_back(key);
    out.push_back(item);
  }
  return make_generator(std::move(out));
}

Value f_reverse(const Value& v, const Arguments& a, Budget& budget) {
  bind_arguments("reverse", a, {});
  if (v.is_string()) {
    std::u32string cs = utf8::decode(v.str());
    std::reverse(cs.begin(), cs.end());
    return Value(utf8::encode(cs));
  }
  std::vector<Value> items = items_of(v, budget);
  std::reverse(items.begin(), items.end());
  return make_generator(std::move(items));
}

Value extreme(const Value& v, const Arguments& a, Budget& budget, bool want_max) {
  const auto p = bind_arguments(want_max ? "max" : "min", a, {"case_sensitive", "attribute"});
  std::vector<Value> items = items_of(v, budget);
  if (items.empty()) return Value(Undefined{std::string("No aggregated item, sequence was empty.")});
  size_t best = 0;
  Value best_key = sort_key(items[0], p[1], truthy(p[0]), budget);
  for (size_t i = 1; i < items.size(); ++i) {
    Value key = sort_key(items[i], p[1], truthy(p[0]), budget);
    const int c = compare(key, best_key);
    if (want_max ? c > 0 : c < 0) {
      best = i;
      best_key = std::move(key);
    }
  }
  return items[best];
}

Value f_min(const Value& v, const Arguments& a, Budget& b) { return extreme(v, a, b, false); }
Value f_max(const Value& v, const Arguments& a, Budget& b) { return extreme(v, a, b, true); }

Value f_sum(const Value& v, const Arguments& a, Budget& budget) {
  const auto p = bind_arguments("sum", a, {"attribute", "start"});
  Value total = p[1].is_undefined() ? Value(0) : p[1];
  for (const Value& item : items_of(v, budget)) {
    const Value term = p[0].is_undefined() || p[0].is_none() ? item : get_path(item, to_str(p[0]), budget);
    total = binary_op("+", total, term, budget);
  }
  return total;
}

Value f_batch(const Value& v, const Arguments& a, Budget& budget) {
  const auto p = bind_arguments("batch", a, {"linecount", "fill_with"});
  const int64_t n = as_int(p[0]);
  if (n <= 0) throw Error("batch: linecount must be positive");
  std::vector<Value> out, row;
  for (const Value& item : items_of(v, budget)) {
    row.push_back(item);
    if (static_cast<int64_t>(row.size()) == n) out.push_back(make_list(std::exchange(row, {})));
  }
  if (!row.empty()) {
    if (!p[1].is_undefined() && !p[1].is_none()) {
      budget.check_size(static_cast<size_t>(n));
      while (static_cast<int64_t>(row.size()) < n) row.push_back(p[1]);
    }
    out.push_back(make_list(std::move(row)));
  }
  return make_generator(std::move(out));
}

Value f_slice(const Value& v, const Arguments& a, Budget& budget) {
  const auto p = bind_arguments("slice", a, {"slices", "fill_with"});
  const int64_t slices = as_int(p[0]);
  if (slices <= 0) throw Error("slice: the number of slices must be positive");
  budget.check_size(static_cast<size_t>(slices));
  const std::vector<Value> seq = items_of(v, budget);
  const int64_t n = static_cast<int64_t>(seq.size());
  const int64_t per = n / slices, with_extra = n % slices;
  std::vector<Value> out;
  int64_t offset = 0;
  for (int64_t s = 0; s < slices; ++s) {
    const int64_t start = offset + s * per;
    if (s < with_extra) ++offset;
    const int64_t end = offset + (s + 1) * per;
    std::vector<Value> part(seq.begin() + start, seq.begin() + end);
    if (!p[1].is_undefined() && !p[1].is_none() && s >= with_extra) part.push_back(p[1]);
    out.push_back(make_list(std::move(part)));
  }
  return make_generator(std::move(out));
}

}  // namespace

void add_sequence_filters(void (*add)(const char* name, FilterFn f)) {
  add("length", f_length);
  add("count", f_length);
  add("first", f_first);
  add("last", f_last);
  add("list", f_list);
  add("items", f_items);
  add("join", f_join);
  add("map", f_map);
  add("select", f_select);
  add("reject", f_reject);
  add("selectattr", f_selectattr);
  add("rejectattr", f_rejectattr);
  add("sort", f_sort);
  add("dictsort", f_dictsort);
  add("unique", f_unique);
  add("reverse", f_reverse);
  add("min", f_min);
  add("max", f_max);
  add("sum", f_sum);
  add("batch", f_batch);
  add("slice", f_slice);
}

}  // namespace pagoda::jinja
