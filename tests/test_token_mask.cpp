// The grammar token mask against brute force: at every step of random walks through several
// grammars (JSON, UTF-8 classes, alternatives that complete inside a token, a literal prefix,
// nested rules), on a synthetic vocabulary and on the real 32k-152k ones of ../shared/vocab,
// TokenMask::fill_mask must equal, bit for bit, "not excluded and the matcher accepts the
// token's bytes" for every token; also inside a partial UTF-8 character and from several
// threads sharing one mask. BudgetMask, the mask cut to tokens whose shortest completion fits
// a byte limit, against the same brute force.

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/grammar/budget_mask.h"
#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/shortest_completion.h"
#include "engine/grammar/token_mask.h"
#include "engine/grammar/token_mask_cache.h"
#include "engine/grammar/token_trie.h"
#include "engine/tokenizer/tokenizer.h"
#include "pagoda/error.h"
#include "support/test_support.h"

namespace pagoda::grammar {
namespace {

std::string json_grammar() {
  std::ifstream in(std::string(PAGODA_SOURCE_DIR) + "/tests/data/json.gbnf");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct NamedGrammar {
  const char* name;
  std::string text;
};

std::vector<NamedGrammar> grammars() {
  return {
      {"json", json_grammar()},
      // Greek, CJK and any non-ASCII character, in classes and literals.
      {"utf8",
       "root ::= word (\" \" word)* \".\"?\n"
       "word ::= [α-ωΑ-Ω]+ | [一-鿿]{1,3} | \"é\" [^\\x00-\\x7F]* | [a-z]+ [α-ω]?\n"},
      // Alternatives and repetitions that can end after any character of a longer token.
      {"alternatives",
       "root ::= (\"a\" | \"ab\" | \"abc\" | \"the\" | \"then\") (\"c\" | \"cd\" | \" \" | \"b\")* \"x\"?\n"},
      {"literal", "root ::= \"Answer: \" [0-9]+ (\".\" [0-9]{1,2})? \"\\n\"\n"},
      {"nested",
       "root ::= item (\",\" \" \"? item)*\n"
       "item ::= \"(\" list? \")\" | [a-z]+ | \"<\" item \">\"\n"
       "list ::= item (\" \" item)*\n"},
  };
}

// The definition the mask must meet.
std::vector<uint64_t> brute_force_mask(const TokenTrie& trie, const GrammarMatcher& state) {
  std::vector<uint64_t> bits((size_t(trie.vocab_size()) + 63) / 64, 0);
  for (int32_t id = 0; id < trie.vocab_size(); ++id) {
    if (!trie.excluded(id) && state.accepts_utf8_prefix(trie.token(id)))
      bits[size_t(id) / 64] |= uint64_t(1) << (id % 64);
  }
  return bits;
}

std::vector<int32_t> ids_in(const std::vector<uint64_t>& bits) {
  std::vector<int32_t> ids;
  for (size_t w = 0; w < bits.size(); ++w) {
    for (uint64_t m = bits[w]; m != 0; m &= m - 1) ids.push_back(int32_t(w * 64 + size_t(__builtin_ctzll(m))));
  }
  return ids;
}

// The first few tokens on which two masks differ, for the failure message.
std::string differences(const TokenTrie& trie, const std::vector<uint64_t>& fast, const std::vector<uint64_t>& slow) {
  std::string out;
  int shown = 0;
  for (size_t w = 0; w < fast.size() && shown < 8; ++w) {
    for (uint64_t m = fast[w] ^ slow[w]; m != 0 && shown < 8; m &= m - 1, ++shown) {
      const int32_t id = int32_t(w * 64 + size_t(__builtin_ctzll(m)));
      out += " token " + std::to_string(id) + " '" + std::string(trie.token(id)) + "' brute force " +
             ((slow[w] >> (id % 64)) & 1 ? "allows" : "refuses") + ";";
    }
  }
  return out;
}

// Random walks: at each step the fast mask must equal brute force; then a random allowed token
// (often a one-byte one, so the walk reaches punctuation, not only long words) is accepted.
void check_walks(const TokenMask& mask, int walks, int steps) {
  const TokenTrie& trie = mask.trie();
  std::mt19937 rng(1234);
  std::vector<uint64_t> fast;
  for (int walk = 0; walk < walks; ++walk) {
    GrammarMatcher state(mask.grammar());
    std::string text;
    for (int step = 0; step < steps; ++step) {
      mask.fill_mask(state, fast);
      const std::vector<uint64_t> slow = brute_force_mask(trie, state);
      ASSERT_EQ(fast, slow) << "after '" << text << "':" << differences(trie, fast, slow);
      const std::vector<int32_t> allowed = ids_in(slow);
      if (allowed.empty()) break;
      std::vector<int32_t> short_ones;
      for (const int32_t id : allowed) {
        if (trie.token(id).size() == 1) short_ones.push_back(id);
      }
      const std::vector<int32_t>& pool = !short_ones.empty() && rng() % 2 == 0 ? short_ones : allowed;
      const int32_t id = pool[rng() % pool.size()];
      EXPECT_TRUE(mask.allows(state, id));
      ASSERT_TRUE(state.accept_utf8(trie.token(id)));
      text += trie.token(id);
    }
  }
}

// Walk and key depths: 1 and 1 sort tokens by the top position alone (most tokens dependent,
// checked against the whole state); 1 and 2, 2 and 4 refine a shallow walk for deeper keys;
// the defaults leave few tokens dependent.
using Depths = std::vector<std::pair<size_t, size_t>>;
const Depths kAllDepths = {{1, 1}, {1, 2}, {2, 4}, {TokenMask::kDefaultWalkDepth, TokenMask::kDefaultKeyDepth}};

void check_walks(const std::shared_ptr<const TokenTrie>& trie, const std::string& vocab_name, int walks, int steps,
                 const Depths& depths) {
  for (const NamedGrammar& g : grammars()) {
    const auto grammar = std::make_shared<const Grammar>(parse_gbnf(g.text));
    for (const auto& [walk_depth, key_depth] : depths) {
      SCOPED_TRACE(vocab_name + " / " + g.name + " / depths " + std::to_string(walk_depth) + ", " +
                   std::to_string(key_depth));
      check_walks(TokenMask(grammar, trie, walk_depth, key_depth), walks, steps);
    }
  }
}

// Every byte, ASCII words and punctuation clusters, and UTF-8 pieces that end or start inside
// a character, plus an excluded token and an empty one.
std::vector<std::string> synthetic_vocab() {
  std::vector<std::string> v;
  for (int b = 0; b < 256; ++b) v.push_back(std::string(1, char(b)));
  for (const char* t : {"the",
                        "then",
                        "ab",
                        "abc",
                        "abcd",
                        "cd",
                        "a b",
                        "ac",
                        "Answer",
                        "Answer: ",
                        "Answer: 4",
                        "12",
                        "3.5",
                        "0.25\n",
                        "{\"",
                        "\":",
                        "\": \"",
                        "\",",
                        "\"}",
                        "}]",
                        "[{",
                        "true",
                        "false",
                        "null",
                        ", ",
                        ",\n  ",
                        "-1e",
                        "e+",
                        "\\u00",
                        "\\n",
                        "αβ",
                        "ωΑ",
                        "\xCE",
                        "\xB1\xCE",
                        "\xB2",
                        "一",
                        "\xE4\xB8",
                        "\xB8\x80",
                        "é",
                        "éé",
                        "\xC3",
                        "(a",
                        "(a b)",
                        ")",
                        ">,",
                        "<<",
                        "x ",
                        "é\"",
                        "\xF0\x9F\x98\x80",
                        "\xF0\x9F",
                        " \xCE",
                        "\xCE\xB1 \xCE",
                        "\": \"\xE4",
                        ", \"\xC3",
                        "é \xC3",
                        "\xC3\xA9\xC3",
                        "ab\xCE",
                        "b\xCE"}) {
    v.push_back(t);
  }
  v.push_back("");          // empty: never allowed
  v.push_back("excluded");  // excluded below
  return v;
}

TEST(TokenTrie, ExcludedEmptyAndDuplicateTokens) {
  const std::vector<std::string> vocab = {"a", "ab", "", "a", "b", "ab"};
  const std::vector<int32_t> excluded = {4};
  const TokenTrie trie(vocab, excluded);
  EXPECT_EQ(trie.vocab_size(), 6);
  EXPECT_TRUE(trie.excluded(2));  // empty
  EXPECT_TRUE(trie.excluded(4));
  EXPECT_TRUE(trie.excluded(-1));
  EXPECT_TRUE(trie.excluded(6));
  EXPECT_FALSE(trie.excluded(3));
  EXPECT_EQ(trie.token(5), "ab");
  EXPECT_EQ(trie.token(4), "");
  // root, "a" (ids 0 and 3), "ab" (ids 1 and 5): b is excluded, so no node for it.
  ASSERT_EQ(trie.nodes().size(), 3u);
  EXPECT_EQ(trie.nodes()[0].subtree_end, 3u);
  const TokenTrie::Node& a = trie.nodes()[1];
  EXPECT_EQ(a.byte, 'a');
  EXPECT_EQ(std::vector<int32_t>(trie.ids().begin() + a.ids_begin, trie.ids().begin() + a.ids_end),
            (std::vector<int32_t>{0, 3}));
  EXPECT_EQ(trie.max_depth(), 2u);

  const std::vector<int32_t> out_of_range = {6};
  EXPECT_THROW(TokenTrie(vocab, out_of_range), Error);
}

TEST(TokenMask, SyntheticVocabularyMatchesBruteForce) {
  const std::vector<std::string> vocab = synthetic_vocab();
  const std::vector<int32_t> excluded = {int32_t(vocab.size() - 1)};
  check_walks(std::make_shared<const TokenTrie>(vocab, excluded), "synthetic", 20, 40, kAllDepths);
}

TEST(BudgetMask, IsTheGrammarsMaskCutToCompletionsWithinTheLimit) {
  const std::vector<std::string> vocab = synthetic_vocab();
  const std::vector<int32_t> excluded = {int32_t(vocab.size() - 1)};
  const TokenTrie trie(vocab, excluded);
  for (const NamedGrammar& g : grammars()) {
    SCOPED_TRACE(g.name);
    const auto grammar = std::make_shared<const Grammar>(parse_gbnf(g.text));
    const ShortestCompletion completion(grammar);
    BudgetMask budget(trie, completion);
    std::mt19937 rng(99);
    std::vector<uint64_t> fast;
    for (int walk = 0; walk < 8; ++walk) {
      GrammarMatcher state(grammar);
      for (int step = 0; step < 30; ++step) {
        for (const size_t limit : {size_t(0), size_t(1), size_t(3), size_t(6), size_t(1000)}) {
          std::vector<uint64_t> slow((size_t(trie.vocab_size()) + 63) / 64, 0);
          for (int32_t id = 0; id < trie.vocab_size(); ++id) {
            GrammarMatcher after = state;
            const bool fits = !trie.excluded(id) && after.accept_utf8(trie.token(id)) && completion.length(after) &&
                              *completion.length(after) <= limit;
            if (fits) slow[size_t(id) / 64] |= uint64_t(1) << (id % 64);
            EXPECT_EQ(budget.allows(state, id, limit), fits) << "token '" << trie.token(id) << "', limit " << limit;
          }
          budget.fill(state, limit, fast);
          ASSERT_EQ(fast, slow) << "limit " << limit << ":" << differences(trie, fast, slow);
        }
        const std::vector<int32_t> allowed = ids_in(brute_force_mask(trie, state));
        if (allowed.empty()) break;
        ASSERT_TRUE(state.accept_utf8(trie.token(allowed[rng() % allowed.size()])));
      }
    }
  }
}

TEST(TokenMask, InsideAPartialUtf8Character) {
  const std::vector<std::string> vocab = synthetic_vocab();
  const auto trie = std::make_shared<const TokenTrie>(vocab, std::span<const int32_t>());
  for (const char* name : {"utf8", "json"}) {
    SCOPED_TRACE(name);
    std::string text;
    for (const NamedGrammar& g : grammars()) {
      if (std::string(g.name) == name) text = g.text;
    }
    const auto grammar = std::make_shared<const Grammar>(parse_gbnf(text));
    const TokenMask mask(grammar, trie);
    GrammarMatcher state(grammar);
    ASSERT_TRUE(state.accept_utf8(std::string(name) == "json" ? "[\"\xE4" : "\xCE"));
    ASSERT_TRUE(state.has_partial_char());
    std::vector<uint64_t> fast;
    mask.fill_mask(state, fast);
    const std::vector<uint64_t> slow = brute_force_mask(*trie, state);
    EXPECT_EQ(fast, slow) << differences(*trie, fast, slow);
    EXPECT_FALSE(ids_in(slow).empty());  // the character can be completed
  }
}

// "ab\xCE" after "a": [a-z]+ may end after "a" and "!"? with it (the top positions used up),
// "b" goes on inside it, and the partial character at the end can only become the [α-ω]
// below them: dependent on the stack below a key of one or two positions, and allowed.
TEST(TokenMask, APartialCharacterAfterTheKeyIsUsedUp) {
  const std::vector<std::string> vocab = synthetic_vocab();
  const auto trie = std::make_shared<const TokenTrie>(vocab, std::span<const int32_t>());
  const auto grammar =
      std::make_shared<const Grammar>(parse_gbnf("root ::= s [α-ω] | \"(\" root \")\"\n"
                                                 "s ::= t \"!\"?\n"
                                                 "t ::= [a-z]+\n"));
  for (const auto& [walk_depth, key_depth] : {std::pair<size_t, size_t>{1, 1}, {1, 2}, {1, 3}, {2, 2}}) {
    const TokenMask mask(grammar, trie, walk_depth, key_depth);
    for (const char* prefix : {"a", "(a", "((a"}) {
      SCOPED_TRACE(std::string(prefix) + " depths " + std::to_string(walk_depth) + ", " + std::to_string(key_depth));
      GrammarMatcher state(grammar);
      ASSERT_TRUE(state.accept_utf8(prefix));
      std::vector<uint64_t> fast;
      mask.fill_mask(state, fast);
      const std::vector<uint64_t> slow = brute_force_mask(*trie, state);
      EXPECT_EQ(fast, slow) << differences(*trie, fast, slow);
      const int32_t ab_partial = int32_t(std::find(vocab.begin(), vocab.end(), "ab\xCE") - vocab.begin());
      EXPECT_TRUE((slow[size_t(ab_partial) / 64] >> (ab_partial % 64)) & 1);
    }
  }
}

TEST(TokenMask, RefusesAMatcherOfAnotherGrammarAndBadDepths) {
  const std::vector<std::string> vocab = synthetic_vocab();
  const auto trie = std::make_shared<const TokenTrie>(vocab, std::span<const int32_t>());
  const TokenMask mask(std::make_shared<const Grammar>(parse_gbnf("root ::= \"a\"")), trie);
  const GrammarMatcher other(std::make_shared<const Grammar>(parse_gbnf("root ::= \"a\"")));
  std::vector<uint64_t> bits;
  EXPECT_THROW(mask.fill_mask(other, bits), Error);
  EXPECT_THROW(TokenMask(mask.grammar(), trie, 0, 4), Error);
  EXPECT_THROW(TokenMask(mask.grammar(), trie, 5, 4), Error);
}

TEST(TokenMask, ThreadsSharingOneMaskGetExactMasks) {
  const std::vector<std::string> vocab = synthetic_vocab();
  const auto trie = std::make_shared<const TokenTrie>(vocab, std::span<const int32_t>());
  const auto grammar = std::make_shared<const Grammar>(parse_gbnf(json_grammar()));
  const TokenMask mask(grammar, trie);
  const std::vector<std::string> prefixes = {
      "", "{", "{\"a", "{\"a\": ", "[1", "[1.5e", "[true, ", "{\"k\": [\"x\", {"};
  std::vector<std::vector<uint64_t>> results(4 * prefixes.size());
  std::vector<std::thread> threads;
  for (size_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t p = 0; p < prefixes.size(); ++p) {
        GrammarMatcher state(grammar);
        if (state.accept_utf8(prefixes[(p + t) % prefixes.size()]))
          mask.fill_mask(state, results[t * prefixes.size() + (p + t) % prefixes.size()]);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (size_t p = 0; p < prefixes.size(); ++p) {
    GrammarMatcher state(grammar);
    ASSERT_TRUE(state.accept_utf8(prefixes[p])) << prefixes[p];
    const std::vector<uint64_t> slow = brute_force_mask(*trie, state);
    for (size_t t = 0; t < 4; ++t)
      EXPECT_EQ(results[t * prefixes.size() + p], slow) << "'" << prefixes[p] << "' thread " << t;
  }
}

TEST(TokenMaskCache, SharesAMaskPerGrammarTextAndDropsTheLeastRecent) {
  const std::vector<std::string> vocab = synthetic_vocab();
  TokenMaskCache cache(std::make_shared<const TokenTrie>(vocab, std::span<const int32_t>()), 2);
  const std::shared_ptr<const TokenMask> a = cache.get("root ::= \"a\"");
  EXPECT_EQ(cache.get("root ::= \"a\""), a);
  const std::shared_ptr<const TokenMask> b = cache.get("root ::= \"b\"");
  EXPECT_NE(b, a);
  EXPECT_EQ(cache.get("root ::= \"a\""), a);  // now the most recent: "b" goes next
  cache.get("root ::= \"c\"");
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.get("root ::= \"a\""), a);
  EXPECT_NE(cache.get("root ::= \"b\""), b);  // made again

  // A mask from the cache runs matchers of its own grammar.
  GrammarMatcher state(a->grammar());
  std::vector<uint64_t> bits;
  a->fill_mask(state, bits);
  EXPECT_EQ(ids_in(bits), (std::vector<int32_t>{'a'}));

  EXPECT_THROW(cache.get("root ::= \"a"), Error);
  EXPECT_THROW(TokenMaskCache(nullptr), Error);
}

TEST(TokenMaskCache, ThreadsAskingForOneGrammarShareOneMask) {
  const std::vector<std::string> vocab = synthetic_vocab();
  TokenMaskCache cache(std::make_shared<const TokenTrie>(vocab, std::span<const int32_t>()));
  std::vector<std::shared_ptr<const TokenMask>> got(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < got.size(); ++t) threads.emplace_back([&, t] { got[t] = cache.get(json_grammar()); });
  for (std::thread& t : threads) t.join();
  for (const auto& m : got) EXPECT_EQ(m, got[0]);
  EXPECT_EQ(cache.size(), 1u);
}

// The real vocabularies: control and end-of-generation tokens excluded, as the sampler does.
class RealVocab : public ::testing::TestWithParam<std::string> {};

TEST_P(RealVocab, RandomWalksMatchBruteForce) {
  PAGODA_SHARED_OR_SKIP(path, "vocab/ggml-vocab-" + GetParam() + ".gguf");
  const Tokenizer tok = Tokenizer::from_gguf(GgufFile::open(path));
  std::vector<std::string> bytes;
  std::vector<int32_t> excluded = tok.eog_ids();
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    bytes.push_back(tok.token_text(id));
    if (tok.vocab().types[size_t(id)] == TokenType::Control) excluded.push_back(id);
  }
  // Brute force over the whole vocabulary at every step is the slow part: two depth settings.
  check_walks(std::make_shared<const TokenTrie>(bytes, excluded), GetParam(), 2, 16,
              {{1, 2}, {TokenMask::kDefaultWalkDepth, TokenMask::kDefaultKeyDepth}});
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, RealVocab, ::testing::Values("llama-bpe", "qwen2", "llama-spm"),
                         [](const auto& info) {
                           return info.param == "llama-bpe"   ? std::string("llama_bpe")
                                  : info.param == "llama-spm" ? std::string("llama_spm")
                                                              : info.param;
                         });

}  // namespace
}  // namespace pagoda::grammar
