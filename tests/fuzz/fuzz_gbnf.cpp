// GBNF grammars on arbitrary bytes: the input up to the first NUL byte is a grammar, the rest
// is text for it. The same bytes are also read as choices that build a grammar (nested groups,
// alternations, repetitions, references, chains of rules thousands long), so the harness
// reaches structures that byte flips of text rarely do. Parsing must either succeed or refuse
// with pagoda::Error; a parsed grammar then takes the text in token-sized pieces (which may
// split UTF-8 characters), each checked with accepts_utf8_prefix before accept_utf8, and the
// two must agree. The matcher's bounds may refuse an exploding grammar with pagoda::Error,
// never by hanging or faulting.

#include <algorithm>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <string_view>

#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/grammar_matcher.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

// Generated text stops growing here, so one input stays quick.
constexpr size_t kMaxGenerated = size_t(1) << 20;

// A grammar built from choices, without recursion: items, groups opened (possibly thousands
// at once) and closed with a repetition, alternatives, references to rules r0..r7 (defined
// later by choice or at the end), new rules, and chains `cN ::= cN-1 ...` of any length.
std::string generated_grammar(std::string_view bytes) {
  static const char* const kItems[] = {"\"a\"", "\"bc\"", "[a-c]", "[^x]", ".", "\"\\n\"", "[0-9]{1,3}", "\"\""};
  static const char* const kSuffixes[] = {"", "*", "+", "?", "{2}", "{0,3}", "{1,}"};
  pagoda::fuzz::Choices in(bytes);
  std::string out = "root ::= ", chains;
  std::set<int> referenced, defined;
  size_t groups = 0, chain_count = 0;
  while (!in.done() && out.size() + chains.size() < kMaxGenerated) {
    const uint8_t op = in.next();
    switch (op % 8) {
      case 0: {  // open groups
        const size_t n = op & 0x80 ? in.count() : 1;
        for (size_t i = 0; i < n && out.size() < kMaxGenerated; ++i) out += "(";
        groups += n;
        break;
      }
      case 1:  // close a group, maybe repeated
        if (groups > 0) {
          out += ")";
          out += kSuffixes[in.next() % std::size(kSuffixes)];
          out += " ";
          --groups;
        }
        break;
      case 2: out += std::string(kItems[in.next() % std::size(kItems)]) + " "; break;
      case 3: out += "| "; break;
      case 4: {
        const int r = in.next() % 8;
        referenced.insert(r);
        out.append("r").append(std::to_string(r)).append(" ");
        break;
      }
      case 5: out += std::string(kSuffixes[in.next() % std::size(kSuffixes)]) + " "; break;
      case 6: {  // a new rule: the open groups close first
        out += std::string(groups, ')');
        groups = 0;
        const int r = in.next() % 8;
        if (defined.insert(r).second) out.append("\nr").append(std::to_string(r)).append(" ::= ");
        break;
      }
      default: {  // a chain of rules, each the next one
        const size_t n = in.count();
        const std::string name = "c" + std::to_string(chain_count++).append("-");
        out.append(name).append("0 ");
        for (size_t i = 0; i < n && chains.size() < kMaxGenerated; ++i) {
          chains.append(name)
              .append(std::to_string(i))
              .append(" ::= ")
              .append(name)
              .append(std::to_string(i + 1))
              .append("\n");
        }
        chains.append(name).append(std::to_string(n)).append(" ::= \"z\"\n");
      }
    }
  }
  out += std::string(groups, ')') + "\n" + chains;
  for (const int r : referenced) {
    if (!defined.count(r)) out.append("r").append(std::to_string(r)).append(" ::= \"r\"\n");
  }
  return out;
}

void parse_and_match(std::string_view gbnf, std::string_view text) {
  pagoda::fuzz::expect_clean([&] {
    pagoda::grammar::GrammarMatcher matcher(
        std::make_shared<const pagoda::grammar::Grammar>(pagoda::grammar::parse_gbnf(gbnf)));
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
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pagoda::fuzz::check_written_and_generated(data, size, parse_and_match, generated_grammar);
  return 0;
}
