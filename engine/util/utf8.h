#pragma once
// Writing a code point as UTF-8, shared by the pre-tokenizer, the grammar code and the Jinja
// interpreter.

#include <string>

namespace pagoda {

// Appends the UTF-8 of `c` (1 to 4 bytes) to `out`. `c` must be a Unicode scalar value.
void append_utf8(char32_t c, std::string& out);

}  // namespace pagoda
