#include "support/grammar_support.h"

#include <gtest/gtest.h>

#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/grammar_matcher.h"

namespace pagoda::test {

std::shared_ptr<const grammar::Grammar> grammar_of(std::string_view gbnf) {
  return std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(gbnf));
}

bool is_sentence(const std::shared_ptr<const grammar::Grammar>& g, std::string_view text) {
  grammar::GrammarMatcher m(g);
  return m.accept_utf8(text) && m.can_end();
}

void expect_sentences(const std::shared_ptr<const grammar::Grammar>& g,
                      std::initializer_list<std::string_view> sentences,
                      std::initializer_list<std::string_view> non_sentences) {
  for (std::string_view text : sentences) EXPECT_TRUE(is_sentence(g, text)) << "refused: " << text;
  for (std::string_view text : non_sentences) EXPECT_FALSE(is_sentence(g, text)) << "accepted: " << text;
}

}  // namespace pagoda::test
