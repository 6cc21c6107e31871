#pragma once
// Code points of UTF-8 text, for the Python string operations templates use: len(), indexing
// and slicing count code points, not bytes; upper()/lower()/strip() act on characters.

#include <string>
#include <string_view>

namespace pagoda::jinja::utf8 {

// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or values above U+10FFFF).
bool valid(std::string_view s);
// The code points of valid UTF-8 text.
std::u32string decode(std::string_view s);
std::string encode(std::u32string_view s);
size_t length(std::string_view s);

// Python's str.isspace() for one character.
bool is_space(char32_t c);
// Simple case mappings: ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic (the scripts
// chat templates' text is likely to hold); other characters are returned unchanged.
char32_t to_upper(char32_t c);
char32_t to_lower(char32_t c);
bool is_cased(char32_t c);

std::string upper(std::string_view s);
std::string lower(std::string_view s);

}  // namespace pagoda::jinja::utf8
