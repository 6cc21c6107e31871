// ShortestCompletion: from any state a text reached, the completion it writes makes the text a
// whole sentence, and it is the shortest: no shorter text from the same state is one (checked
// by breadth-first search over a small alphabet for short completions).

#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/shortest_completion.h"

namespace pagoda::grammar {
namespace {

std::shared_ptr<const Grammar> json_grammar() {
  std::ifstream in(std::string(PAGODA_SOURCE_DIR) + "/tests/data/json.gbnf");
  std::stringstream s;
  s << in.rdbuf();
  return std::make_shared<const Grammar>(parse_gbnf(s.str()));
}

std::shared_ptr<const Grammar> compiled(const std::string& gbnf) {
  return std::make_shared<const Grammar>(parse_gbnf(gbnf));
}

// Whether some text of at most `n` characters from `alphabet` completes `state`.
bool completes_within(const GrammarMatcher& state, size_t n, const std::u32string& alphabet) {
  if (state.can_end()) return true;
  if (n == 0) return false;
  for (char32_t c : alphabet) {
    GrammarMatcher next = state;
    if (next.accept(c) && completes_within(next, n - 1, alphabet)) return true;
  }
  return false;
}

TEST(ShortestCompletion, ClosesEveryPrefixOfJson) {
  const auto g = json_grammar();
  const ShortestCompletion completion(g);
  const std::vector<std::string> prefixes = {
      "",     "{", "{\"a", "{\"a\"", "{\"a\": ",   "{\"a\": [1, ", "{\"a\": [1, {\"b\": \"x\\",
      "[[[[", "-", "1.",   "1e",     "{\"k\": tr", "\"\\u00",      "[{\"a\": [{\"b\": [\"c",
      "  "};
  for (const std::string& p : prefixes) {
    GrammarMatcher m(g);
    if (!m.accept_utf8(p)) {
      EXPECT_EQ(p, "  ") << "the JSON grammar refused " << p;
      continue;
    }
    const std::optional<std::string> rest = completion.of(m);
    ASSERT_TRUE(rest) << p;
    ASSERT_TRUE(m.accept_utf8(*rest)) << p << " + " << *rest;
    EXPECT_TRUE(m.can_end()) << p << " + " << *rest;
  }
}

TEST(ShortestCompletion, IsTheShortest) {
  const auto g = compiled(R"g(root ::= "(" inner ")" | "<" [a-z]{3,5} ">"
inner ::= "x" | "[" inner "]" | "yy" inner
)g");
  const ShortestCompletion completion(g);
  const std::u32string alphabet = U"()<>[]xya";
  for (const char* p : {"", "(", "([[", "(yy", "(yyyy[", "<", "<a", "<abcd"}) {
    GrammarMatcher m(g);
    ASSERT_TRUE(m.accept_utf8(p)) << p;
    const std::optional<std::string> rest = completion.of(m);
    ASSERT_TRUE(rest) << p;
    EXPECT_FALSE(rest->empty() || completes_within(m, rest->size() - 1, alphabet))
        << p << " + " << *rest << " is not the shortest";
    ASSERT_TRUE(m.accept_utf8(*rest)) << p << " + " << *rest;
    EXPECT_TRUE(m.can_end());
  }
}

TEST(ShortestCompletion, RandomWalksThroughJsonAlwaysClose) {
  const auto g = json_grammar();
  const ShortestCompletion completion(g);
  std::mt19937 rng(3);
  const std::u32string alphabet = U"{}[]\",: \n0123456789.-eEtrufalsn\\abcé";
  for (int walk = 0; walk < 200; ++walk) {
    GrammarMatcher m(g);
    const size_t length = rng() % 60;
    for (size_t i = 0; i < length; ++i) {
      std::vector<char32_t> options;
      for (char32_t c : alphabet) {
        GrammarMatcher probe = m;
        if (probe.accept(c)) options.push_back(c);
      }
      if (options.empty()) break;
      ASSERT_TRUE(m.accept(options[rng() % options.size()]));
    }
    const std::optional<std::string> rest = completion.of(m);
    ASSERT_TRUE(rest);
    EXPECT_EQ(completion.length(m), rest->size());
    ASSERT_TRUE(m.accept_utf8(*rest)) << *rest;
    EXPECT_TRUE(m.can_end());
  }
}

TEST(ShortestCompletion, NoneInsideAPartialCharacter) {
  const auto g = compiled(R"(root ::= "é")");
  const ShortestCompletion completion(g);
  GrammarMatcher m(g);
  ASSERT_TRUE(m.accept_utf8("\xc3"));
  EXPECT_FALSE(completion.of(m));
}

// A grammar that is one long chain of rules (as deep as the matcher expands) is priced
// rule by rule, not pass by pass, and its completion is the chain's last character.
TEST(ShortestCompletion, ClosesALongChainOfRules) {
  std::string gbnf = "root ::= r0\n";
  constexpr int kRules = 60000;
  for (int i = 0; i < kRules; ++i) gbnf += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + "\n";
  gbnf += "r" + std::to_string(kRules) + " ::= \"z\"\n";
  const auto g = compiled(gbnf);
  const ShortestCompletion completion(g);
  EXPECT_EQ(completion.of(GrammarMatcher(g)), std::optional<std::string>("z"));
}

}  // namespace
}  // namespace pagoda::grammar
