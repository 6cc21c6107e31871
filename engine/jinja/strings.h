#pragma once
// Python's str methods that chat templates call, on UTF-8 text, character-wise where Python is.

#include <optional>
#include <string>
#include <vector>

namespace pagoda::jinja::strings {

// strip/lstrip/rstrip: `chars` nullopt strips whitespace.
std::string strip(const std::string& s, const std::optional<std::string>& chars, bool left, bool right);
// split/rsplit: `sep` nullopt splits on runs of whitespace; maxsplit < 0 means no limit.
std::vector<std::string> split(const std::string& s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> rsplit(const std::string& s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> splitlines(const std::string& s, bool keepends);
std::string replace(const std::string& s, const std::string& old, const std::string& replacement, int64_t count,
                    size_t max_size);
std::string title(const std::string& s);
std::string capitalize(const std::string& s);
// Python's str.center(width) with spaces.
std::string center(const std::string& s, int64_t width);
// Code point index of the first (or last) occurrence of `sub`, or -1.
int64_t find(const std::string& s, const std::string& sub, bool last);
int64_t count(const std::string& s, const std::string& sub);

// markupsafe's escape(): & < > " ' as HTML entities.
std::string html_escape(const std::string& s);

}  // namespace pagoda::jinja::strings
