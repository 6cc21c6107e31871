#pragma once
// Grammars in tests: compiling GBNF text and checking which texts are sentences.

#include <initializer_list>
#include <memory>
#include <string_view>

#include "engine/grammar/grammar.h"

namespace pagoda::test {

// `gbnf` parsed (parse_gbnf's pagoda::Error when it does not parse).
std::shared_ptr<const grammar::Grammar> grammar_of(std::string_view gbnf);

// Whether the whole of `text` is a complete sentence of `g`: the matcher takes it and can end.
bool is_sentence(const std::shared_ptr<const grammar::Grammar>& g, std::string_view text);

// Expects each of `sentences` to be a complete sentence of `g` and none of `non_sentences`;
// a failure quotes the text.
void expect_sentences(const std::shared_ptr<const grammar::Grammar>& g,
                      std::initializer_list<std::string_view> sentences,
                      std::initializer_list<std::string_view> non_sentences = {});

}  // namespace pagoda::test
