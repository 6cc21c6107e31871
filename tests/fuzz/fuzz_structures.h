#pragma once
// Structure-aware inputs for the template harnesses: fuzz bytes read as small programs that
// build deep and wide JSON contexts and deeply nested template constructs, so a few bytes reach
// the depth limits (128 levels of context, the parser's and renderer's nesting bounds) that
// plain template text rarely gets near. Everything is built iteratively: the harness, not the
// generator, is what must not recurse without bound.

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "pagoda/chat.h"

namespace pagoda::fuzz {

// Splits at NUL bytes: an input without NUL is one part, as the harnesses' older seeds are.
inline std::vector<std::string_view> split_at_nul(std::string_view input) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (size_t i = 0; i <= input.size(); ++i) {
    if (i == input.size() || input[i] == '\0') {
      parts.push_back(input.substr(start, i - start));
      start = i + 1;
    }
  }
  return parts;
}

// A string of one to four pieces: control-token spellings, so that data spans meet them, and
// text that templates and JSON treat specially.
inline std::string piece_string(unsigned arg) {
  static const char* const kPieces[] = {
      "hi", "<|im_end|>", "<|im_start|>", "</s>",    "<|eot_id|>", "\n", " ", "Zürich", "<|start_header_id|>", "{{",
      "%}", "'",          "\"",           "<think>", "",           "x"};
  std::string s;
  for (unsigned i = 0; i <= arg % 4; ++i) s += kPieces[(arg + i * 7) % 16];
  return s;
}

// A JSON value from a byte program. Each byte is an operation (low 3 bits) with an argument
// (the rest): open an array or object, close one, add a string (pieces of control-token
// spellings, so data spans meet them), an integer or a literal, open `arg * 8` arrays at once
// (past the 128-level limit in two bytes), or repeat the last value added `arg * 16` times.
// The program stops after 2^17 values, a megabyte's worth of JSON, as json_text does.
inline nlohmann::ordered_json build_json(std::string_view program) {
  using json = nlohmann::ordered_json;
  constexpr size_t kMaxValues = size_t(1) << 17;
  json root = json::array();
  std::vector<json*> open{&root};
  size_t values = 0;
  auto add = [&](json value) -> json* {
    ++values;
    json& parent = *open.back();
    if (parent.is_object()) {  // keys are new by construction: append without ordered_map's scan
      auto& entries = parent.get_ref<json::object_t&>();
      entries.emplace_back("k" + std::to_string(entries.size()), std::move(value));
      return &entries.back().second;
    }
    parent.push_back(std::move(value));
    return &parent.back();
  };
  json last = nullptr;
  for (const unsigned char b : program) {
    if (values > kMaxValues) break;
    const unsigned arg = b >> 3;
    switch (b & 7) {
      case 0: open.push_back(add(json::array())); break;
      case 1: open.push_back(add(json::object())); break;
      case 2:
        if (open.size() > 1) open.pop_back();
        break;
      case 3:
        last = piece_string(arg);
        add(last);
        break;
      case 4:
        last = int64_t(arg) - 8;
        add(last);
        break;
      case 5:
        for (unsigned i = 0; i < arg * 8 + 1; ++i) open.push_back(add(json::array()));
        break;
      case 6:
        for (unsigned i = 0; i < arg * 16 && !last.is_null() && values <= kMaxValues; ++i) add(last);
        break;
      default: last = arg % 2 ? json(true) : json(nullptr); add(last);
    }
  }
  return root;
}

// The same program as JSON text (objects' keys generated), for the APIs that take text; open
// containers are closed at the end, so the text is always valid JSON. The program stops once the
// text passes 1 MiB (pagoda-server's default --max-body): repetition could otherwise make a
// 64 KiB program into gigabytes, which measures memory, not the code under test.
inline std::string json_text(std::string_view program) {
  constexpr size_t kMaxText = size_t(1) << 20;
  std::string out = "[";
  std::vector<std::pair<char, size_t>> open{{']', 0}};  // closing bracket, items so far
  std::string last;
  auto item = [&](const std::string& text) {
    auto& [close, count] = open.back();
    if (count++) out += ',';
    if (close == '}') out += "\"k" + std::to_string(count) + "\":";
    out += text;
  };
  for (const unsigned char b : program) {
    if (out.size() > kMaxText) break;
    const unsigned arg = b >> 3;
    switch (b & 7) {
      case 0:
        item("[");
        open.push_back({']', 0});
        break;
      case 1:
        item("{");
        open.push_back({'}', 0});
        break;
      case 2:
        if (open.size() > 1) {
          out += open.back().first;
          open.pop_back();
        }
        break;
      case 3:
        last = nlohmann::ordered_json(piece_string(arg)).dump();
        item(last);
        break;
      case 4:
        last = std::to_string(int(arg) - 8);
        item(last);
        break;
      case 5:
        for (unsigned i = 0; i < arg * 8 + 1; ++i) {
          item("[");
          open.push_back({']', 0});
        }
        break;
      case 6:
        for (unsigned i = 0; i < arg * 16 && !last.empty() && out.size() <= kMaxText; ++i) item(last);
        break;
      default: last = arg % 2 ? "true" : "null"; item(last);
    }
  }
  for (auto it = open.rbegin(); it != open.rend(); ++it) out += it->first;
  return out;
}

// `inner` inside `program`'s nested constructs, one per byte, innermost last: if, for, macro,
// set block, filter block, with, call block, and parenthesised expressions around an output.
inline std::string nest_template(std::string_view program, std::string_view inner) {
  std::string head, tail;
  int name = 0;
  for (const unsigned char b : program) {
    const std::string n = "m" + std::to_string(name++);
    switch (b % 8) {
      case 0:
        head += "{% if deep is defined %}";
        tail = "{% endif %}" + tail;
        break;
      case 1:
        head += "{% for " + n + " in (deep or [1])[:2] %}";
        tail = "{% endfor %}" + tail;
        break;
      case 2:
        head += "{% macro " + n + "() %}";
        tail = "{% endmacro %}{{ " + n + "() }}" + tail;
        break;
      case 3:
        head += "{% set " + n + " %}";
        tail = "{% endset %}{{ " + n + " }}" + tail;
        break;
      case 4:
        head += "{% filter trim %}";
        tail = "{% endfilter %}" + tail;
        break;
      case 5:
        head += "{% with " + n + " = messages %}";
        tail = "{% endwith %}" + tail;
        break;
      case 6:
        head += "{% macro " + n + "() %}{{ caller() }}{% endmacro %}{% call " + n + "() %}";
        tail = "{% endcall %}" + tail;
        break;
      default: head += "{{ " + std::string(b / 8, '(') + "deep" + std::string(b / 8, ')') + " }}"; break;
    }
  }
  return head + std::string(inner) + tail;
}

// A render's data spans must lie sorted, disjoint and inside its text.
inline void check_spans(const ChatPrompt& p) {
  size_t end = 0;
  for (const TextSpan& s : p.data_spans) {
    if (s.begin < end || s.begin >= s.end || s.end > p.text.size()) std::abort();
    end = s.end;
  }
}

}  // namespace pagoda::fuzz
