#pragma once
// Taint tracking of message data through a render. A string that came from the chat's data
// (messages, tools, template kwargs) carries the byte ranges of it that are data; the operations
// on strings carry those ranges into their results (precisely for concatenation, slicing,
// strip, split, replace and join; for the rest the whole result is data when any input byte
// was), so the rendered prompt knows which of its bytes the template wrote and which it copied
// from the user. Data is never turned back into template text: the tokenizer parses control
// tokens only outside the data ranges.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/jinja/value.h"

namespace pagoda::jinja {

// `spans` is sorted, non-overlapping and never has two touching ranges (they are merged).
void add_span(Spans& spans, size_t begin, size_t end);

// The data ranges of a string value (nullptr when it has none).
inline const Spans* spans_of(const Value& v) { return v.spans && !v.spans->empty() ? v.spans.get() : nullptr; }
// `s` as a string value that is data throughout.
Value data_string(std::string s);
// `result` made conservatively data when it is a string without data ranges computed from
// inputs that held data (`input`, `args`, or any string inside them: list items, dict keys and
// values, namespace attributes): what an operation that cannot track ranges precisely returns.
Value widen(Value result, const Value& input, const Arguments* args = nullptr);

// A string under construction with the data ranges of what was appended.
class TextBuilder {
 public:
  // The template's own text.
  void append_plain(std::string_view text) { text_ += text; }
  // A string value's bytes [begin, end) (clamped) with their data ranges.
  void append(const Value& v, size_t begin = 0, size_t end = std::string::npos);
  void append_data(std::string_view text);
  size_t size() const { return text_.size(); }
  void reserve(size_t bytes) { text_.reserve(bytes); }
  Value take(bool markup = false);

 private:
  std::string text_;
  Spans spans_;
};

// Bytes [begin, end) of string value `v`, with their data ranges.
Value substring(const Value& v, size_t begin, size_t end);
// The parts a split of `v` returned, in order, each located in `v` so that it keeps its data
// ranges (a part that cannot be located is data whole when `v` holds any).
Value located_parts(const Value& v, const std::vector<std::string>& parts);
// `v` with its leading and trailing bytes that `stripped` dropped: `stripped` is a substring
// of v.str() (what strip returned).
Value stripped_part(const Value& v, const std::string& stripped, bool left, bool right);
// Python's str.replace on a value: the kept bytes keep their ranges, inserted copies of
// `replacement` carry its own.
Value replace_tracked(const Value& v, const std::string& old, const Value& replacement, int64_t count, size_t max_size);
// A case mapping of `v` (upper, lower, title, capitalize): ASCII text maps byte for byte, so
// the ranges stay; otherwise the whole result is data when `v` held any.
Value case_mapped(const Value& v, std::string mapped);
// str(v) with its data ranges: a string's own, a container holding data is data whole.
Value to_text(const Value& v);

}  // namespace pagoda::jinja
