// JSON Schema compilation on arbitrary bytes: the input up to the first NUL byte is a schema,
// the rest text for its grammar. Compiling must succeed or refuse with pagoda::Error; a
// compiled grammar must parse (anything else is a compiler bug, so it aborts) and its matcher
// then takes the text a code point at a time, bounded by its own limits.

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/json_schema.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t split = std::min(input.find('\0'), input.size());
  const std::string_view schema = input.substr(0, split);
  const std::string_view text = split < input.size() ? input.substr(split + 1) : std::string_view();
  std::string gbnf;
  pagoda::fuzz::expect_clean([&] { gbnf = pagoda::grammar::json_schema_to_gbnf(schema); });
  if (gbnf.empty()) return 0;
  std::shared_ptr<const pagoda::grammar::Grammar> grammar;
  try {
    grammar = std::make_shared<const pagoda::grammar::Grammar>(pagoda::grammar::parse_gbnf(gbnf));
  } catch (const pagoda::Error&) {
    std::abort();  // the compiler wrote a grammar its own parser refuses
  }
  pagoda::fuzz::expect_clean([&] {
    pagoda::grammar::GrammarMatcher matcher(grammar);
    for (const char c : text) {
      if (!matcher.accept_utf8(std::string_view(&c, 1))) break;
    }
    (void)matcher.can_end();
  });
  return 0;
}
