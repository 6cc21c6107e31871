#include "engine/jinja/strings.h"

#include <algorithm>

#include "engine/jinja/utf8.h"
#include "engine/util/utf8.h"
#include "pagoda/error.h"

namespace pagoda::jinja::strings {

std::string strip(const std::string& s, const std::optional<std::string>& chars, bool left, bool right) {
  const std::u32string cs = utf8::decode(s);
  const std::u32string set = chars ? utf8::decode(*chars) : std::u32string();
  auto strippable = [&](char32_t c) { return chars ? set.find(c) != std::u32string::npos : utf8::is_space(c); };
  size_t lo = 0, hi = cs.size();
  if (left) {
    while (lo < hi && strippable(cs[lo])) ++lo;
  }
  if (right) {
    while (hi > lo && strippable(cs[hi - 1])) --hi;
  }
  return utf8::encode(std::u32string_view(cs).substr(lo, hi - lo));
}

namespace {

std::vector<std::string> split_whitespace(const std::string& s, int64_t maxsplit, bool from_right) {
  std::u32string cs = utf8::decode(s);
  if (from_right) std::reverse(cs.begin(), cs.end());
  std::vector<std::string> parts;
  size_t i = 0;
  while (i < cs.size()) {
    while (i < cs.size() && utf8::is_space(cs[i])) ++i;
    if (i >= cs.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      size_t end = cs.size();
      while (end > i && utf8::is_space(cs[end - 1])) --end;
      std::u32string rest = cs.substr(i, end - i);
      if (from_right) std::reverse(rest.begin(), rest.end());
      parts.push_back(utf8::encode(rest));
      break;
    }
    size_t j = i;
    while (j < cs.size() && !utf8::is_space(cs[j])) ++j;
    std::u32string word = cs.substr(i, j - i);
    if (from_right) std::reverse(word.begin(), word.end());
    parts.push_back(utf8::encode(word));
    i = j;
  }
  if (from_right) std::reverse(parts.begin(), parts.end());
  return parts;
}

}  // namespace

std::vector<std::string> split(const std::string& s, const std::optional<std::string>& sep, int64_t maxsplit) {
  if (!sep) return split_whitespace(s, maxsplit, false);
  if (sep->empty()) throw Error("empty separator");
  std::vector<std::string> parts;
  size_t start = 0;
  while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
    const size_t at = s.find(*sep, start);
    if (at == std::string::npos) break;
    parts.push_back(s.substr(start, at - start));
    start = at + sep->size();
  }
  parts.push_back(s.substr(start));
  return parts;
}

std::vector<std::string> rsplit(const std::string& s, const std::optional<std::string>& sep, int64_t maxsplit) {
  if (!sep) return split_whitespace(s, maxsplit, true);
  if (sep->empty()) throw Error("empty separator");
  std::vector<std::string> parts;
  size_t end = s.size();
  while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
    if (end < sep->size()) break;
    const size_t at = s.rfind(*sep, end - sep->size());
    if (at == std::string::npos) break;
    parts.push_back(s.substr(at + sep->size(), end - at - sep->size()));
    end = at;
  }
  parts.push_back(s.substr(0, end));
  std::reverse(parts.begin(), parts.end());
  return parts;
}

std::vector<std::string> splitlines(const std::string& s, bool keepends) {
  const std::u32string cs = utf8::decode(s);
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < cs.size(); ++i) {
    const char32_t c = cs[i];
    const bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) || c == 0x85 ||
                     c == 0x2028 || c == 0x2029;
    if (!brk) continue;
    size_t end = i + 1;
    if (c == '\r' && i + 1 < cs.size() && cs[i + 1] == '\n') end = i + 2;
    lines.push_back(utf8::encode(std::u32string_view(cs).substr(start, (keepends ? end : i) - start)));
    start = end;
    i = end - 1;
  }
  if (start < cs.size()) lines.push_back(utf8::encode(std::u32string_view(cs).substr(start)));
  return lines;
}

std::string replace(const std::string& s, const std::string& old, const std::string& replacement, int64_t count,
                    size_t max_size) {
  std::string out;
  auto append = [&](std::string_view piece) {
    if (out.size() + piece.size() > max_size)
      throw Error("template output exceeds the limit of " + std::to_string(max_size) + " bytes");
    out += piece;
  };
  if (old.empty()) {
    // Python inserts the replacement before every character and at the end.
    const std::u32string cs = utf8::decode(s);
    int64_t done = 0;
    for (char32_t c : cs) {
      if (count < 0 || done < count) {
        append(replacement);
        ++done;
      }
      std::string ch;
      append_utf8(c, ch);
      append(ch);
    }
    if (count < 0 || done < count) append(replacement);
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t at = s.find(old, start);
    if (at == std::string::npos) break;
    append(std::string_view(s).substr(start, at - start));
    append(replacement);
    start = at + old.size();
    ++done;
  }
  append(std::string_view(s).substr(start));
  return out;
}

std::string title(const std::string& s) {
  std::u32string cs = utf8::decode(s);
  bool previous_cased = false;
  for (char32_t& c : cs) {
    if (utf8::is_cased(c)) {
      c = previous_cased ? utf8::to_lower(c) : utf8::to_upper(c);
      previous_cased = true;
    } else {
      previous_cased = false;
    }
  }
  return utf8::encode(cs);
}

std::string capitalize(const std::string& s) {
  std::u32string cs = utf8::decode(s);
  for (size_t i = 0; i < cs.size(); ++i) cs[i] = i == 0 ? utf8::to_upper(cs[i]) : utf8::to_lower(cs[i]);
  return utf8::encode(cs);
}

std::string center(const std::string& s, int64_t width) {
  const int64_t n = static_cast<int64_t>(utf8::length(s));
  if (width <= n) return s;
  const int64_t margin = width - n;
  const int64_t left = margin / 2 + (margin & width & 1);
  return std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(margin - left), ' ');
}

int64_t find(const std::string& s, const std::string& sub, bool last) {
  const size_t at = last ? s.rfind(sub) : s.find(sub);
  if (at == std::string::npos) return -1;
  return static_cast<int64_t>(utf8::length(std::string_view(s).substr(0, at)));
}

int64_t count(const std::string& s, const std::string& sub) {
  if (sub.empty()) return static_cast<int64_t>(utf8::length(s)) + 1;
  int64_t n = 0;
  for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
  return n;
}

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

}  // namespace pagoda::jinja::strings
