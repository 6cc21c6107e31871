// GBNF grammars on arbitrary bytes: the input up to the first NUL byte is a grammar, the rest
// is text for it. Parsing must either succeed or refuse with pagoda::Error; a parsed grammar
// then takes the text in token-sized pieces (which may split UTF-8 characters), each checked
// with accepts_utf8_prefix before accept_utf8, and the two must agree. The matcher's bounds
// may refuse an exploding grammar with pagoda::Error, never by hanging or faulting.

#include <algorithm>
#include <cstring>
#include <memory>
#include <string_view>

#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/grammar_matcher.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t split = std::min(input.find('\0'), input.size());
  const std::string_view gbnf = input.substr(0, split);
  const std::string_view text = split < input.size() ? input.substr(split + 1) : std::string_view();
  pagoda::fuzz::expect_clean([&] {
    pagoda::grammar::GrammarMatcher matcher(std::make_shared<const pagoda::grammar::Grammar>(pagoda::grammar::parse_gbnf(gbnf)));
    // Piece lengths cycle 1..4 so pieces end at every offset of a multi-byte character.
    size_t piece = 1;
    for (size_t at = 0; at < text.size(); at += piece, piece = piece % 4 + 1) {
      const std::string_view token = text.substr(at, piece);
      const bool allowed = matcher.accepts_utf8_prefix(token);
      if (matcher.accept_utf8(token) != allowed) std::abort();
      if (!allowed) break;
    }
    (void)matcher.can_end();
  });
  return 0;
}
