// Grammar-constrained decoding through the Engine, on stories260K: the greedy output under a
// grammar is the oracle's argmax over the tokens the grammar allows, step by step; sampled
// outputs are sentences of the grammar; constrained requests give the same tokens alone and in
// a batch with unconstrained ones; a lazy grammar leaves the output free until its trigger.

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/model/model.h"
#include "testing/reference_model.h"
#include "pagoda/engine.h"
#include "pagoda/error.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

// Words the little story model knows, so constrained outputs are not all forced.
const char* const kStoryGrammar = R"(root ::= "Once upon a time, there was a " animal " named " name ". " tail
animal ::= "cat" | "dog" | "bird" | "little girl" | "boy"
name ::= [A-Z] [a-z]{1,8}
tail ::= [a-zA-Z ,]{0,60} "."
)";

class EngineGrammar : public test::StoriesTest {
 protected:
  static std::shared_ptr<const grammar::Grammar> compiled(const std::string& gbnf) {
    return std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(gbnf));
  }

  // Whether `text` is a complete sentence of `gbnf`.
  static bool complete_sentence(const std::string& gbnf, const std::string& text) {
    grammar::GrammarMatcher m(compiled(gbnf));
    return m.accept_utf8(text) && m.can_end();
  }

  // The oracle's greedy continuation under `gbnf`: at each step the most likely token among
  // those whose text the grammar accepts (control and empty tokens never; EOS once complete).
  std::vector<int32_t> expected(const std::vector<int32_t>& prompt, const std::string& gbnf, int32_t n) {
    const Model model = load_model(model_);
    ReferenceModel ref(model);
    grammar::GrammarMatcher matcher(compiled(gbnf));
    std::vector<int32_t> tokens = prompt, out;
    for (int32_t pos = 0; int32_t(out.size()) < n; ++pos) {
      std::vector<float> logits = ref.forward(tokens[pos], pos);
      if (pos + 1 < int32_t(tokens.size())) continue;
      int32_t best = -1;
      for (int32_t id = 0; id < int32_t(logits.size()); ++id) {
        bool allowed;
        if (model.tokenizer.is_eog(id)) {
          allowed = matcher.can_end();
        } else {
          const TokenType type = model.tokenizer.vocab().types[size_t(id)];
          const std::string text = model.tokenizer.token_text(id);
          allowed = type != TokenType::Control && type != TokenType::Unknown && type != TokenType::Unused &&
                    !text.empty() && matcher.accepts_utf8_prefix(text);
        }
        if (allowed && (best < 0 || logits[id] > logits[best])) best = id;
      }
      if (best < 0) break;
      out.push_back(best);
      if (model.tokenizer.is_eog(best)) break;
      EXPECT_TRUE(matcher.accept_utf8(model.tokenizer.token_text(best)));
      tokens.push_back(best);
    }
    return out;
  }

  // What the grammar read: the generated tokens' text, without an ending token.
  static std::string grammar_text(const Engine& engine, const Completion& c) {
    std::string text;
    for (int32_t id : c.token_ids) {
      if (c.finish_reason == FinishReason::Eos && id == c.token_ids.back()) break;
      text += engine.token_text(id);
    }
    return text;
  }

  static Request constrained(const std::vector<int32_t>& prompt, int32_t n, float temperature, uint64_t seed) {
    Request r = test::greedy_request(prompt, n);
    r.sampling.temperature = temperature;
    r.sampling.seed = seed;
    r.ignore_eos = false;
    r.grammar = kStoryGrammar;
    return r;
  }
};

TEST_F(EngineGrammar, GreedyIsTheOraclesArgmaxOverAllowedTokens) {
  Engine engine({.model_path = model_, .threads = 2});
  const std::vector<int32_t> prompt = cases_.front().prompt_ids;
  const int32_t n = 80;
  RequestHandle h = engine.submit(constrained(prompt, n, 0.0f, 0));
  const Completion c = test::await(h);
  EXPECT_EQ(c.token_ids, expected(prompt, kStoryGrammar, n));
  ASSERT_EQ(c.finish_reason, FinishReason::Eos) << c.text;
  EXPECT_TRUE(complete_sentence(kStoryGrammar, grammar_text(engine, c))) << c.text;
}

TEST_F(EngineGrammar, SampledOutputsAreSentencesOfTheGrammar) {
  Engine engine({.model_path = model_, .threads = 2});
  const std::vector<int32_t> prompt = cases_.front().prompt_ids;
  std::vector<RequestHandle> handles;
  for (uint64_t seed = 1; seed <= 12; ++seed) handles.push_back(engine.submit(constrained(prompt, 120, 1.0f, seed)));
  std::vector<std::string> texts;
  for (RequestHandle& h : handles) {
    const Completion c = test::await(h);
    ASSERT_EQ(c.finish_reason, FinishReason::Eos) << c.text;
    EXPECT_TRUE(complete_sentence(kStoryGrammar, grammar_text(engine, c))) << c.text;
    texts.push_back(c.text);
  }
  std::sort(texts.begin(), texts.end());
  EXPECT_GT(std::unique(texts.begin(), texts.end()) - texts.begin(), 1) << "every seed gave the same story";
}

TEST_F(EngineGrammar, ConstrainedTokensDoNotDependOnTheBatch) {
  const std::vector<int32_t> prompt = cases_.front().prompt_ids;
  std::vector<std::vector<int32_t>> alone;
  {
    Engine engine({.model_path = model_, .threads = 2});
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      RequestHandle h = engine.submit(constrained(prompt, 100, 0.8f, seed));
      alone.push_back(test::await(h).token_ids);
    }
  }
  Engine engine({.model_path = model_, .threads = 2});
  std::vector<RequestHandle> crowd, constrained_handles;
  for (size_t i = 0; i < cases_.size(); ++i) {
    Request r = test::greedy_request(cases_[i].prompt_ids, 100);
    r.sampling.temperature = 1.0f;
    r.sampling.seed = 100 + i;
    crowd.push_back(engine.submit(r));
    if (i < 4) constrained_handles.push_back(engine.submit(constrained(prompt, 100, 0.8f, i + 1)));
  }
  for (size_t i = 0; i < constrained_handles.size(); ++i) {
    EXPECT_EQ(test::await(constrained_handles[i]).token_ids, alone[i]) << "seed " << i + 1;
  }
  for (RequestHandle& h : crowd) test::await(h);
}

TEST_F(EngineGrammar, ACompleteGrammarEndsTheOutputEvenWithoutEos) {
  Engine engine({.model_path = model_, .threads = 2});
  Request r = test::greedy_request(cases_.front().prompt_ids, 50);
  r.grammar = R"(root ::= " yes" | " no")";
  r.ignore_eos = true;
  RequestHandle h = engine.submit(r);
  const Completion c = test::await(h);
  const std::string text = grammar_text(engine, c);
  EXPECT_TRUE(text == " yes" || text == " no") << text;
  EXPECT_EQ(c.finish_reason, FinishReason::Stop);
}

TEST_F(EngineGrammar, ALazyGrammarConstrainsFromItsTrigger) {
  Engine engine({.model_path = model_, .threads = 2});
  const std::vector<int32_t> prompt = cases_.front().prompt_ids;
  RequestHandle free_handle = engine.submit(test::greedy_request(prompt, 60));
  const Completion free_run = test::await(free_handle);
  // The trigger: a word the free greedy output reaches after a few tokens.
  const size_t at = free_run.text.find(' ', free_run.text.size() / 3);
  ASSERT_NE(at, std::string::npos) << free_run.text;
  const size_t end = free_run.text.find(' ', at + 1);
  ASSERT_NE(end, std::string::npos) << free_run.text;
  const std::string trigger = free_run.text.substr(at, end - at);
  const std::string gbnf = "root ::= \"" + trigger + "\" \" ZZZ\" [a-z ]{0,10} \".\"\n";

  Request r = test::greedy_request(prompt, 60);
  r.grammar = gbnf;
  r.grammar_triggers = {trigger};
  RequestHandle h = engine.submit(r);
  const Completion c = test::await(h);
  const size_t t = c.text.find(trigger);
  ASSERT_NE(t, std::string::npos) << c.text;
  // Free up to the trigger: the same text as without a grammar; then the grammar's.
  EXPECT_EQ(c.text.substr(0, t), free_run.text.substr(0, t));
  EXPECT_TRUE(complete_sentence(gbnf, c.text.substr(t))) << c.text;
}

TEST_F(EngineGrammar, TheBudgetClosesTheSentence) {
  // The story model would go on writing lowercase words; near max_new_tokens the grammar
  // writes its shortest completion instead, so every budget that fits one ends whole.
  Engine engine({.model_path = model_, .threads = 2});
  const std::string gbnf = "root ::= \"{\\\"story\\\": [\\\"\" [a-z ]* \"\\\", \\\"\" [a-z ]* \"\\\"]}\"\n";
  for (int32_t n = 24; n <= 48; n += 4) {
    for (float temperature : {0.0f, 1.0f}) {
      Request r = test::greedy_request(cases_.front().prompt_ids, n);
      r.sampling.temperature = temperature;
      r.sampling.seed = uint64_t(n);
      r.grammar = gbnf;
      RequestHandle h = engine.submit(r);
      const Completion c = test::await(h);
      EXPECT_TRUE(complete_sentence(gbnf, grammar_text(engine, c))) << n << ": " << c.text;
      EXPECT_LE(c.token_ids.size(), size_t(n));
    }
  }
}

TEST_F(EngineGrammar, BadGrammarsAreRefusedAtSubmit) {
  Engine engine({.model_path = model_, .threads = 2});
  Request r = test::greedy_request(cases_.front().prompt_ids, 8);
  r.grammar = "root ::= \"unterminated";
  try {
    engine.submit(r);
    FAIL() << "a malformed grammar was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("grammar"), std::string::npos) << e.what();
  }
  r.grammar = "root ::= \"a\"";
  r.json_schema = R"({"type": "string"})";
  EXPECT_THROW(engine.submit(r), Error);
  r.json_schema.clear();
  r.grammar.clear();
  r.grammar_triggers = {"x"};
  EXPECT_THROW(engine.submit(r), Error);
  EXPECT_EQ(engine.metrics().running, 0);
}

}  // namespace
}  // namespace pagoda
