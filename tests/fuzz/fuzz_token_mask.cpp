// The grammar token mask against brute force on arbitrary grammars: the input up to the first
// NUL byte is a GBNF grammar, the rest is text for it. The vocabulary is every single byte,
// pieces of the text itself (so the tokens fit the grammar often, and end and start inside
// UTF-8 characters where the text does), and a few fixed words; the text is fed in pieces of
// 1-4 bytes, and at each step fill_mask (with shallow and default depths) must equal "the
// matcher accepts the token's bytes" for every token, and allows() must agree with it. A
// grammar the parser or the matcher's bounds refuse is a clean pagoda::Error.

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/token_mask.h"
#include "engine/grammar/token_trie.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

using namespace pagoda::grammar;

std::vector<std::string> vocabulary(std::string_view text) {
  std::vector<std::string> v;
  for (int b = 1; b < 256; ++b) v.push_back(std::string(1, char(b)));
  for (const char* word : {"ab", "abc", "{\"", "\":", "\",", "true", " ", "\n", "\xCE", "\xCE\xB1", "\xB1"})
    v.push_back(word);
  for (size_t at = 0; at < text.size() && at < 48; ++at) {
    for (size_t length = 2; length <= 6 && at + length <= text.size(); length += 2)
      v.emplace_back(text.substr(at, length));
  }
  return v;
}

void check_state(const GrammarMatcher& state, const TokenMask (&masks)[2], const TokenTrie& trie) {
  std::vector<uint64_t> bits;
  for (const TokenMask& mask : masks) {
    mask.fill_mask(state, bits);
    for (int32_t id = 0; id < trie.vocab_size(); ++id) {
      const bool allowed = !trie.excluded(id) && state.accepts_utf8_prefix(trie.token(id));
      if (((bits[size_t(id) / 64] >> (id % 64)) & 1) != allowed || mask.allows(state, id) != allowed) std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const pagoda::fuzz::TwoParts parts = pagoda::fuzz::split_at_first_nul(data, size);
  const std::string_view gbnf = parts.first, text = parts.second;
  pagoda::fuzz::expect_clean([&] {
    const auto grammar = std::make_shared<const Grammar>(parse_gbnf(gbnf));
    const auto trie = std::make_shared<const TokenTrie>(vocabulary(text), std::span<const int32_t>());
    const TokenMask masks[2] = {{grammar, trie, 1, 2}, {grammar, trie}};
    GrammarMatcher state(grammar);
    check_state(state, masks, *trie);
    size_t piece = 1;
    for (size_t at = 0; at < text.size() && at < 64; at += piece, piece = piece % 4 + 1) {
      if (!state.accept_utf8(text.substr(at, piece))) break;
      check_state(state, masks, *trie);
    }
  });
  return 0;
}
