// GBNF grammars: the parser's refusals (with line:column), and the matcher's acceptance of
// text code point by code point and of token bytes that stop inside a UTF-8 character.

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/grammar_matcher.h"
#include "pagoda/error.h"
#include "support/grammar_support.h"

namespace pagoda::grammar {
namespace {

using test::expect_sentences;
using test::grammar_of;

GrammarMatcher matcher_for(std::string_view gbnf) { return GrammarMatcher(grammar_of(gbnf)); }

// Whether the whole text is a complete sentence of the grammar.
bool matches(std::string_view gbnf, std::string_view text) { return test::is_sentence(grammar_of(gbnf), text); }

std::string parse_error(std::string_view gbnf) {
  try {
    parse_gbnf(gbnf);
  } catch (const Error& e) {
    return e.what();
  }
  return "(parsed)";
}

std::string json_grammar() {
  std::ifstream in(std::string(PAGODA_SOURCE_DIR) + "/tests/data/json.gbnf");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(GbnfParser, ErrorsNameLineAndColumn) {
  EXPECT_EQ(parse_error("root ::= \"a\" b\n"), "grammar: 1:14: undefined rule 'b'");
  EXPECT_EQ(parse_error("a ::= \"x\"\n"), "grammar: 2:1: no 'root' rule (the start rule)");
  EXPECT_EQ(parse_error("root ::= \"a\"\nx ::= \"abc\n"), "grammar: 2:7: unterminated string literal");
  EXPECT_EQ(parse_error("root ::= [a-z\n"), "grammar: 1:10: unterminated character class");
  EXPECT_EQ(parse_error("root ::= \"\\q\""), "grammar: 1:11: bad escape '\\q'");
  EXPECT_EQ(parse_error("root ::= \"\\x4\""), "grammar: 1:11: bad escape: expecting 2 hex digits");
  EXPECT_EQ(parse_error("root ::= \"a\"{3,2}"), "grammar: 1:13: repetition {m,n} with m > n");
  EXPECT_EQ(parse_error("root ::= \"a\"{1001}"), "grammar: 1:13: repetition bound above 1000");
  EXPECT_EQ(parse_error("root ::= \"a\"{2"), "grammar: 1:13: unterminated repetition: expecting '}'");
  EXPECT_EQ(parse_error("root ::= * \"a\""), "grammar: 1:10: repetition '*' with no item before it");
  EXPECT_EQ(parse_error("root ::= (\"a\" | \"b\"\n"), "grammar: 1:10: unterminated group: expecting ')'");
  EXPECT_EQ(parse_error("root ::= \"a\"\nroot ::= \"b\""), "grammar: 2:1: rule 'root' defined twice");
  EXPECT_EQ(parse_error("root = \"a\""), "grammar: 1:6: expecting '::=' after rule name 'root'");
  EXPECT_EQ(parse_error("root ::= \"a\" )"), "grammar: 1:14: expecting end of line after rule 'root'");
  EXPECT_EQ(parse_error("root ::= [z-a]"), "grammar: 1:11: character range with its end before its start");
}

TEST(GbnfParser, LeftRecursionIsRefused) {
  EXPECT_EQ(parse_error("root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [0-9]\n"),
            "grammar: 2:1: left recursion (expr -> expr): a rule reaches itself before reading a character");
  // Through another rule, and past a prefix that can be empty.
  EXPECT_EQ(parse_error("root ::= a\na ::= b \"x\"\nb ::= c? a | \"y\"\nc ::= \"z\"\n"),
            "grammar: 2:1: left recursion (a -> b -> a): a rule reaches itself before reading a character");
  // A star over something that can be empty loops the same way.
  EXPECT_NE(parse_error("root ::= (\"a\"?)*").find("left recursion"), std::string::npos);
  // Right recursion is fine.
  EXPECT_TRUE(matches("root ::= \"(\" root \")\" | \"\"", "((()))"));
}

TEST(GbnfParser, CommentsNewlinesAndGroups) {
  const char* gbnf =
      "# a comment line\n"
      "root ::= greeting (\n"
      "    \" \" name   # newlines are fine inside a group\n"
      "  )? \"!\"\n"
      "\n"
      "greeting ::= \"hi\" |\n"
      "  \"hello\"\n"
      "name ::= [A-Z] [a-z]*\n";
  EXPECT_TRUE(matches(gbnf, "hi!"));
  EXPECT_TRUE(matches(gbnf, "hello Ada!"));
  EXPECT_FALSE(matches(gbnf, "hello ada!"));
  EXPECT_FALSE(matches(gbnf, "hey!"));
  // CRLF line endings end rules too.
  EXPECT_TRUE(matches("root ::= a\r\na ::= \"x\"\r\n", "x"));
}

TEST(GrammarMatcher, JsonGrammarAcceptsJson) {
  const std::string gbnf = json_grammar();
  ASSERT_FALSE(gbnf.empty());
  for (const char* valid : {"{}", "[]", "0", "-12.5e+3", "true", "null", "\"\"", "\"a\\\"b\\\\c\\u00e9\\n\"",
                            "{\"a\": 1, \"b\": [true, false, null], \"c\": {\"d\": \"e\"}}", "[1, 2,\n  3]",
                            "{\"caf\xC3\xA9\": \"\xE4\xB8\xAD\xF0\x9F\x98\x80\"}"}) {
    EXPECT_TRUE(matches(gbnf, valid)) << valid;
  }
  for (const char* invalid : {"{", "[1,]", "{\"a\" 1}", "01", "1.", "tru", "\"a\nb\"", "\"\\x\"", "{'a': 1}", "[1 2]",
                              "\"\\u00g0\"", "nul"}) {
    EXPECT_FALSE(matches(gbnf, invalid)) << invalid;
  }
}

TEST(GrammarMatcher, RejectionLeavesTheStateUnchanged) {
  GrammarMatcher m = matcher_for(json_grammar());
  ASSERT_TRUE(m.accept_utf8("{\"k\": "));
  EXPECT_FALSE(m.accept_utf8("}"));
  EXPECT_FALSE(m.accept(U'x'));
  EXPECT_TRUE(m.accept_utf8("[1]}"));
  EXPECT_TRUE(m.can_end());
}

TEST(GrammarMatcher, RepetitionBounds) {
  expect_sentences(grammar_of("root ::= \"ab\"{2,3} [0-9]{2} \"x\"{1,} \"y\"{0,1}"), {"abab12x", "ababab12xxxy"},
                   {"ab12x", "abababab12x", "abab1x", "abab123x", "abab12", "abab12xyy"});
  expect_sentences(grammar_of("root ::= \"a\"{3}"), {"aaa"}, {"aa"});
  EXPECT_TRUE(matches("root ::= \"a\"{0}", ""));
}

TEST(GrammarMatcher, CharacterClasses) {
  expect_sentences(grammar_of("root ::= [a-cx]+"), {"abcxa"}, {"abd"});
  expect_sentences(grammar_of("root ::= [^a-c]+"), {"xyz!"}, {"xby"});
  // Escapes inside classes: ] - \ and hex; a '-' last is literal.
  expect_sentences(grammar_of("root ::= [\\]\\-\\\\\\x41]+"), {"]-\\A"}, {"B"});
  EXPECT_TRUE(matches("root ::= [a-]+", "a-a"));
  expect_sentences(grammar_of("root ::= [^\\n]* \"\\n\""), {"anything at all\n"}, {"two\nlines\n"});
  // '.' is any one code point, a multi-byte one too.
  expect_sentences(grammar_of("root ::= . ."), {"\xC3\xA9z"}, {"abc"});
  // \u and \U escapes name code points beyond ASCII.
  EXPECT_TRUE(matches("root ::= [\\u00e0-\\u00ff] \"\\U0001F600\"", "\xC3\xA9\xF0\x9F\x98\x80"));
}

TEST(GrammarMatcher, Utf8LiteralsAndPartialTokenBytes) {
  const char* gbnf = "root ::= \"caf\xC3\xA9 \" (\"\xE4\xB8\xAD\" | \"\xF0\x9F\x98\x80\")";
  GrammarMatcher m = matcher_for(gbnf);
  // A token ending inside "é": its first byte is kept pending.
  ASSERT_TRUE(m.accept_utf8("caf\xC3"));
  EXPECT_FALSE(m.can_end());
  EXPECT_FALSE(m.accept(U' '));                 // the partial character must complete first
  EXPECT_FALSE(m.accepts_utf8_prefix("\xA8"));  // "è" is not "é"
  ASSERT_TRUE(m.accept_utf8("\xA9 "));
  // The lead byte of the 3-byte "中" is viable; that of a 4-byte character is only viable as
  // U+1F600's prefix: F0 9F yes, F0 9E no.
  EXPECT_TRUE(m.accepts_utf8_prefix("\xE4"));
  EXPECT_TRUE(m.accepts_utf8_prefix("\xF0\x9F"));
  EXPECT_FALSE(m.accepts_utf8_prefix("\xF0\x9E"));
  EXPECT_FALSE(m.accepts_utf8_prefix("\xE5"));
  // Only overlong encodings begin E0 80, so even '.' cannot continue them; E0 A0 it can.
  EXPECT_FALSE(matcher_for("root ::= .").accepts_utf8_prefix("\xE0\x80"));
  EXPECT_TRUE(matcher_for("root ::= .").accepts_utf8_prefix("\xE0\xA0"));
  EXPECT_FALSE(m.accepts_utf8_prefix("\xFF"));      // never valid UTF-8
  EXPECT_FALSE(m.accepts_utf8_prefix("\xE4\x41"));  // a lead byte then ASCII
  GrammarMatcher smiley = m;                        // a cheap clone, as a sampler makes per candidate
  ASSERT_TRUE(smiley.accept_utf8("\xF0\x9F"));
  ASSERT_TRUE(smiley.accept_utf8("\x98\x80"));
  EXPECT_TRUE(smiley.can_end());
  ASSERT_TRUE(m.accept_utf8("\xE4\xB8\xAD"));
  EXPECT_TRUE(m.can_end());
}

TEST(GrammarMatcher, CanEnd) {
  GrammarMatcher m = matcher_for("root ::= \"a\" \"b\"*");
  EXPECT_FALSE(m.can_end());
  ASSERT_TRUE(m.accept(U'a'));
  EXPECT_TRUE(m.can_end());
  ASSERT_TRUE(m.accept(U'b'));
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.accept(U'a'));
  EXPECT_TRUE(matcher_for("root ::= \"\" | \"x\"").can_end());
}

TEST(GrammarMatcher, ExplodingGrammarIsRefusedByTheBound) {
  // After n x's every mix of n pending y's and z's is alive: 2^n stacks.
  GrammarMatcher m = matcher_for("root ::= a\na ::= \"x\" a \"y\" | \"x\" a \"z\" | \"\"\n");
  bool refused = false;
  try {
    for (int i = 0; i < 64; ++i) ASSERT_TRUE(m.accept(U'x'));
  } catch (const Error& e) {
    refused = true;
    EXPECT_NE(std::string(e.what()).find("too ambiguous"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(refused);
  EXPECT_LE(m.stack_count(), GrammarMatcher::kMaxStacks);
}

TEST(GrammarMatcher, NestingIsBoundedByDepth) {
  GrammarMatcher m = matcher_for("root ::= \"(\" root \")\" | \"\"");
  size_t accepted = 0;
  try {
    while (accepted < 2 * GrammarMatcher::kMaxDepth && m.accept(U'(')) ++accepted;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nesting deeper than 8192"), std::string::npos) << e.what();
  }
  EXPECT_GE(accepted, GrammarMatcher::kMaxDepth - 1);
  EXPECT_LT(accepted, GrammarMatcher::kMaxDepth + 1);
}

}  // namespace
}  // namespace pagoda::grammar
