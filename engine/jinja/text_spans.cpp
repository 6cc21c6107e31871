#include "engine/jinja/text_spans.h"

#include <algorithm>

#include "engine/jinja/utf8.h"
#include "engine/util/utf8.h"
#include "pagoda/error.h"

namespace pagoda::jinja {

namespace {

// Deeper than this, holds_data_at answers "yes" instead of looking further (namespaces can hold
// themselves); the answer only errs towards data.
constexpr int kMaxScanDepth = 256;

bool holds_data_at(const Value& v, int depth) {
  if (v.is_string()) return spans_of(v) != nullptr;
  if (!v.is_list() && !v.is_dict() && !v.is_namespace()) return false;
  if (depth > kMaxScanDepth) return true;
  if (v.is_list()) {
    return std::any_of(v.list().items.begin(), v.list().items.end(),
                       [&](const Value& item) { return holds_data_at(item, depth + 1); });
  }
  const Dict& d = v.is_dict() ? v.dict() : std::get<NamespacePtr>(v.v)->attributes;
  return std::any_of(d.items.begin(), d.items.end(), [&](const auto& kv) {
    return holds_data_at(kv.first, depth + 1) || holds_data_at(kv.second, depth + 1);
  });
}

Value with_spans(std::string text, Spans spans, bool markup = false) {
  Value out(std::move(text));
  out.markup = markup;
  if (!spans.empty()) out.spans = std::make_shared<const Spans>(std::move(spans));
  return out;
}

bool is_ascii(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

}  // namespace

void add_span(Spans& spans, size_t begin, size_t end) {
  if (begin >= end) return;
  if (!spans.empty() && spans.back().end >= begin) {
    spans.back().end = std::max(spans.back().end, end);
    return;
  }
  spans.push_back({begin, end});
}

Value data_string(std::string s) {
  Spans spans;
  add_span(spans, 0, s.size());
  return with_spans(std::move(s), std::move(spans));
}

Value widen(Value result, const Value& input, const Arguments* args) {
  if (!result.is_string() || spans_of(result) || result.str().empty()) return result;
  bool data = holds_data_at(input, 0);
  if (!data && args) {
    data = std::any_of(args->positional.begin(), args->positional.end(),
                       [](const Value& a) { return holds_data_at(a, 0); }) ||
           std::any_of(args->keyword.begin(), args->keyword.end(),
                       [](const auto& kv) { return holds_data_at(kv.second, 0); });
  }
  if (!data) return result;
  const bool markup = result.markup;
  Value out = data_string(std::move(std::get<std::string>(result.v)));
  out.markup = markup;
  return out;
}

void TextBuilder::append(const Value& v, size_t begin, size_t end) {
  const std::string& s = v.str();
  end = std::min(end, s.size());
  if (begin >= end) return;
  const size_t at = text_.size();
  text_.append(s, begin, end - begin);
  const Spans* spans = spans_of(v);
  if (!spans) return;
  // The first range that ends after `begin`; ranges are sorted, so a binary search.
  auto it = std::upper_bound(spans->begin(), spans->end(), begin, [](size_t b, const Span& sp) { return b < sp.end; });
  for (; it != spans->end() && it->begin < end; ++it) {
    add_span(spans_, at + std::max(it->begin, begin) - begin, at + std::min(it->end, end) - begin);
  }
}

void TextBuilder::append_data(std::string_view text) {
  const size_t at = text_.size();
  text_ += text;
  add_span(spans_, at, text_.size());
}

Value TextBuilder::take(bool markup) { return with_spans(std::move(text_), std::move(spans_), markup); }

Value substring(const Value& v, size_t begin, size_t end) {
  TextBuilder b;
  b.append(v, begin, end);
  return b.take();
}

Value located_parts(const Value& v, const std::vector<std::string>& parts) {
  std::vector<Value> items;
  items.reserve(parts.size());
  if (!spans_of(v)) {
    for (const std::string& p : parts) items.emplace_back(p);
    return make_list(std::move(items));
  }
  const std::string& s = v.str();
  size_t pos = 0;
  for (const std::string& p : parts) {
    const size_t at = s.find(p, pos);
    if (at == std::string::npos) {
      items.push_back(widen(Value(p), v));
      continue;
    }
    items.push_back(substring(v, at, at + p.size()));
    pos = at + p.size();
  }
  return make_list(std::move(items));
}

Value stripped_part(const Value& v, const std::string& stripped, bool left, bool right) {
  if (!spans_of(v)) return Value(stripped);
  const std::string& s = v.str();
  const size_t begin = left ? (right ? s.find(stripped) : s.size() - stripped.size()) : 0;
  if (begin == std::string::npos || s.compare(begin, stripped.size(), stripped) != 0) return widen(Value(stripped), v);
  return substring(v, begin, begin + stripped.size());
}

Value replace_tracked(const Value& v, const std::string& old, const Value& replacement, int64_t count,
                      size_t max_size) {
  const std::string& s = v.str();
  TextBuilder out;
  auto check = [&] {
    if (out.size() > max_size)
      throw Error("template output exceeds the limit of " + std::to_string(max_size) + " bytes");
  };
  int64_t done = 0;
  auto insert = [&] {
    if (count >= 0 && done >= count) return;
    out.append(replacement);
    ++done;
    check();
  };
  if (old.empty()) {
    // Python inserts the replacement before every character and at the end.
    const std::u32string cs = utf8::decode(s);
    size_t at = 0;
    for (char32_t c : cs) {
      insert();
      std::string ch;
      append_utf8(c, ch);
      if (s.compare(at, ch.size(), ch) == 0 && spans_of(v)) {
        out.append(v, at, at + ch.size());
      } else if (spans_of(v)) {
        out.append_data(ch);
      } else {
        out.append_plain(ch);
      }
      at += ch.size();
      check();
    }
    insert();
    return out.take();
  }
  size_t start = 0;
  while (count < 0 || done < count) {
    const size_t at = s.find(old, start);
    if (at == std::string::npos) break;
    out.append(v, start, at);
    insert();
    start = at + old.size();
  }
  out.append(v, start);
  check();
  return out.take();
}

Value case_mapped(const Value& v, std::string mapped) {
  if (!v.is_string() || !spans_of(v)) return widen(Value(std::move(mapped)), v);
  if (mapped.size() == v.str().size() && is_ascii(v.str())) return with_spans(std::move(mapped), *v.spans);
  return data_string(std::move(mapped));
}

Value to_text(const Value& v) {
  if (v.is_string()) return v;
  return widen(Value(to_str(v)), v);
}

}  // namespace pagoda::jinja
