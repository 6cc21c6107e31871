// WordPiece (llama.cpp's WPM, GGUF tokenizer.ggml.model "bert") against llama.cpp: its own test
// cases for the BGE vocabulary (ggml-vocab-bert-bge.gguf with .inp/.out, from ../shared/vocab or
// else llama.cpp's snapshot in /tmp/llama.cpp/models; skipped when neither has it), and
// tests/data/tokenizer_wpm.json: our own strings with llama.cpp's ids under every
// (add_special, parse_special) setting and its token_to_piece text (tests/data/
// tokenizer_wpm_oracle.cpp wrote them). Then the rules one by one on a small vocabulary built
// here, the Unicode tables, and the loader's keys.

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/wpm_tokenizer.h"
#include "engine/tokenizer/wpm_unicode.h"
#include "pagoda/error.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<int32_t>;

// The BGE vocabulary: ../shared/vocab first, then llama.cpp's snapshot; "" when neither has it.
const std::string& bge_path() {
  static const std::string path = [] {
    for (const std::string& dir : {std::string(PAGODA_SHARED_DIR) + "/vocab", std::string("/tmp/llama.cpp/models")}) {
      const std::string p = dir + "/ggml-vocab-bert-bge.gguf";
      if (fs::exists(p) && fs::exists(p + ".inp") && fs::exists(p + ".out")) return p;
    }
    return std::string();
  }();
  return path;
}

const Tokenizer& bge() {
  static const Tokenizer tok = Tokenizer::from_gguf(GgufFile::open(bge_path()));
  return tok;
}

#define SKIP_WITHOUT_BGE()                                                                                       \
  do {                                                                                                           \
    if (bge_path().empty())                                                                                      \
      GTEST_SKIP() << "ggml-vocab-bert-bge.gguf (+ .inp/.out) is neither in ../shared/vocab nor /tmp/llama.cpp/" \
                      "models";                                                                                  \
  } while (0)

TEST(WpmBge, EncodesLlamaCppsTestCasesAsItDoes) {
  SKIP_WITHOUT_BGE();
  const auto cases = test::read_vocab_cases(bge_path() + ".inp");
  const auto want = test::read_vocab_ids(bge_path() + ".out");
  ASSERT_EQ(cases.size(), 46u);
  ASSERT_EQ(want.size(), cases.size());
  EXPECT_EQ(bge().model(), TokenizerModel::Wpm);
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(bge().encode(cases[i], false), want[i]) << "case " << i << ": \"" << cases[i] << "\"";
  }
}

TEST(WpmBge, PagodaTokenizePrintsTheOutFile) {
  SKIP_WITHOUT_BGE();
  const std::string exe = std::string(PAGODA_BINARY_DIR) + "/examples/pagoda-tokenize";
  ASSERT_TRUE(fs::exists(exe)) << exe << " is not built";
  const std::string out = test::scratch_path("tokenize-bert-bge.out");
  const std::string cmd = "'" + exe + "' -m '" + bge_path() + "' --inp '" + bge_path() + ".inp' > '" + out + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  EXPECT_EQ(test::read_file(out), test::read_file(bge_path() + ".out"));
}

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out += char(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

TEST(WpmBge, OurCasesGiveLlamaCppsIdsAndPiecesUnderEverySetting) {
  SKIP_WITHOUT_BGE();
  const auto doc =
      nlohmann::json::parse(test::read_file(std::string(PAGODA_SOURCE_DIR) + "/tests/data/tokenizer_wpm.json"));
  const Tokenizer& tok = bge();
  size_t compared = 0;
  for (const auto& c : doc["cases"]) {
    const std::string text = c.contains("text") ? c["text"].get<std::string>() : from_hex(c["hex"].get<std::string>());
    const std::string name = c.contains("text") ? "\"" + text + "\"" : "hex " + c["hex"].get<std::string>();
    if (c.contains("llama_cpp_throws")) {
      // llama.cpp throws on a code point past U+10FFFF; pagoda drops it like other bad bytes.
      for (int32_t id : tok.encode(text, true, true)) EXPECT_TRUE(id >= 0 && id < tok.vocab_size()) << name;
      continue;
    }
    for (const auto& run : c["runs"]) {
      const bool add_special = run["add_special"], parse_special = run["parse_special"];
      EXPECT_EQ(tok.encode(text, add_special, parse_special), run["ids"].get<Ids>())
          << name << " add_special " << add_special << " parse_special " << parse_special;
    }
    EXPECT_EQ(tok.decode(c["runs"][0]["ids"].get<Ids>()), c["pieces"].get<std::string>()) << name;
    ++compared;
  }
  EXPECT_GE(compared, 150u);
}

TEST(WpmBge, NamesBertsSpecialTokensAndAddsThemAroundTheText) {
  SKIP_WITHOUT_BGE();
  const Tokenizer& tok = bge();
  EXPECT_EQ(tok.bos_id(), 101);  // [CLS]
  EXPECT_EQ(tok.sep_id(), 102);
  EXPECT_EQ(tok.unk_id(), 100);
  EXPECT_TRUE(tok.add_bos());
  EXPECT_EQ(tok.encode("", true), (Ids{101, 102}));
  EXPECT_EQ(tok.encode("", false), Ids{});
  // User text is never a control token unless asked.
  EXPECT_EQ(tok.encode("[MASK]", false, true), Ids{103});
  EXPECT_EQ(tok.encode("[MASK]", false), (Ids{1031, 7308, 1033}));
}

// A small vocabulary in llama.cpp's spelling: "▁" starts a word, continuations are bare.
std::string write_small_vocab(const std::string& name, bool with_ids = true) {
  auto start = [](const char* word) { return "\xE2\x96\x81" + std::string(word); };  // "▁" + word
  std::vector<std::string> tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};  // 0-4
  for (const char* word : {"hello", "world", ",", "!", "un", "unhappy", "cafe", "[", "cls", "]",
                           "\xE4\xB8\xAD" /* 中 */, "\xE6\x96\x87" /* 文 */, "$", "42", "x"}) {
    tokens.push_back(start(word));  // 5-19
  }
  for (const char* rest : {"happi", "ness", "h"}) tokens.push_back(rest);  // 20-22
  std::vector<int32_t> types(tokens.size(), int32_t(TokenType::Normal));
  for (int i = 0; i < 5; ++i) types[size_t(i)] = int32_t(TokenType::Control);
  types[1] = int32_t(TokenType::Unknown);
  GgufWriter w;
  w.set_string("general.architecture", "bert");
  w.set_string("tokenizer.ggml.model", "bert");
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_i32_array("tokenizer.ggml.token_type", types);
  if (with_ids) {
    w.set_u32("tokenizer.ggml.cls_token_id", 2);
    w.set_u32("tokenizer.ggml.seperator_token_id", 3);
    w.set_u32("tokenizer.ggml.unknown_token_id", 1);
    w.set_u32("tokenizer.ggml.padding_token_id", 0);
    w.set_u32("tokenizer.ggml.mask_token_id", 4);
  }
  const std::string path = test::scratch_path(name);
  w.write(path);
  return path;
}

const Tokenizer& small() {
  static const Tokenizer tok = Tokenizer::from_gguf(GgufFile::open(write_small_vocab("wpm-small.gguf")));
  return tok;
}

TEST(WpmSmall, LowerCasesAndStripsAccents) {
  EXPECT_EQ(small().encode("HeLLo WORLD", false), (Ids{5, 6}));
  EXPECT_EQ(small().encode("Café CAFÉ", false), (Ids{11, 11}));
  // A combining mark written apart stays part of the word, as in llama.cpp: no such piece.
  EXPECT_EQ(small().encode("cafe\xCC\x81", false), Ids{1});
}

TEST(WpmSmall, PunctuationAsciiSymbolsAndCjkAreWordsOfTheirOwn) {
  EXPECT_EQ(small().encode("hello,world!", false), (Ids{5, 7, 6, 8}));
  EXPECT_EQ(small().encode("x$42", false), (Ids{19, 17, 18}));
  EXPECT_EQ(small().encode("hello\xE4\xB8\xAD\xE6\x96\x87world", false), (Ids{5, 15, 16, 6}));
}

TEST(WpmSmall, TakesTheLongestPieceFirstAndAWordWithoutAMatchIsUnknown) {
  EXPECT_EQ(small().encode("unhappiness", false), (Ids{9, 20, 21}));  // ▁un happi ness: ▁unhappy does not fit
  EXPECT_EQ(small().encode("unhappy", false), Ids{10});
  EXPECT_EQ(small().encode("helloh", false), (Ids{5, 22}));
  EXPECT_EQ(small().encode("hellos world", false), (Ids{1, 6}));  // "s" matches nothing: the whole word is [UNK]
  EXPECT_EQ(small().encode("\t\n  ", false), Ids{});
}

TEST(WpmSmall, SpecialTokensParseOnlyOnRequestAndAddSpecialBracketsTheText) {
  EXPECT_EQ(small().encode("[CLS] hello", false, true), (Ids{2, 5}));
  EXPECT_EQ(small().encode("[CLS] hello", false, false), (Ids{12, 13, 14, 5}));
  EXPECT_EQ(small().encode("hello", true), (Ids{2, 5, 3}));
  EXPECT_EQ(small().encode("hello[MASK]world", true, true), (Ids{2, 5, 4, 6, 3}));
}

TEST(WpmSmall, DecodingSpellsWordStartsAsSpacesAndHidesControlTokens) {
  const Ids ids = small().encode("Unhappiness, hello!", true);
  EXPECT_EQ(ids, (Ids{2, 9, 20, 21, 7, 5, 8, 3}));
  EXPECT_EQ(small().decode(ids), " unhappiness , hello !");
  EXPECT_EQ(small().token_text(9), " un");
  EXPECT_EQ(small().token_text(2), "");
  EXPECT_EQ(small().decode(small().encode("hello world", false)), " hello world");
}

TEST(WpmSmall, LoaderDefaultsToBertsIdsAndNamesTheKey) {
  // Without the ids the defaults (CLS 101, SEP 102, UNK 100) lie outside 23 tokens.
  const std::string p = write_small_vocab("wpm-noids.gguf", false);
  try {
    Tokenizer::from_gguf(GgufFile::open(p));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("101"), std::string::npos) << e.what();
  }
  EXPECT_EQ(small().bos_id(), 2);  // cls_token_id when there is no bos_token_id
  EXPECT_EQ(small().eos_id(), 3);  // [SEP] stands in for the EOS BERT has none of
  EXPECT_FALSE(small().add_space_prefix());
}

TEST(WpmWords, SplitLikeLlamaCppsPreprocessing) {
  using V = std::vector<std::string>;
  EXPECT_EQ(WpmTokenizer::words("Hello, \xE4\xB8\x96\xE7\x95\x8C! Caf\xC3\xA9\tx"),
            (V{"hello", ",", "\xE4\xB8\x96", "\xE7\x95\x8C", "!", "cafe", "x"}));
  // NUL, controls, format characters and ill-formed bytes vanish without ending the word.
  const std::string dropped = std::string("a\0b", 3) + "\x07" + "c\xC2\xAD" + "d\x80" + "e";
  EXPECT_EQ(WpmTokenizer::words(dropped), (V{"abcde"}));
  EXPECT_EQ(WpmTokenizer::words("a\xC0\xAF"
                                "b"),
            (V{"a", "/", "b"}));  // an overlong '/' as llama.cpp reads it
}

TEST(WpmUnicode, TablesAnswerAsUnicodeDataSays) {
  EXPECT_EQ(wpm_lower('A'), U'a');
  EXPECT_EQ(wpm_lower(0x130), U'i');             // İ
  EXPECT_EQ(wpm_lower(0x100), char32_t(0x101));  // Ā, a stride-2 run
  EXPECT_EQ(wpm_lower(0x101), char32_t(0x101));
  EXPECT_EQ(wpm_lower(0x1E9E), char32_t(0xDF));  // ẞ → ß
  EXPECT_EQ(wpm_decompose_first(0xE9), U'e');
  EXPECT_EQ(wpm_decompose_first(0x1E09), U'c');              // ḉ → ç → c
  EXPECT_EQ(wpm_decompose_first(0xAC00), char32_t(0x1100));  // 가 → ᄀ
  EXPECT_EQ(wpm_decompose_first(0xFB01), char32_t(0xFB01));  // ﬁ: a compatibility mapping only
  EXPECT_EQ(wpm_char_class(0xAD), WpmCharClass::Control);
  EXPECT_EQ(wpm_char_class('!'), WpmCharClass::Punctuation);
  EXPECT_EQ(wpm_char_class('$'), WpmCharClass::Other);  // a symbol: alone only below U+007F, by the tokenizer
  EXPECT_EQ(wpm_char_class(0x3000), WpmCharClass::Whitespace);
  EXPECT_EQ(wpm_char_class(0xE000), WpmCharClass::Control);  // private use
  EXPECT_EQ(wpm_char_class(0x378), WpmCharClass::Other);     // unassigned
  EXPECT_TRUE(wpm_is_cjk(0x4E2D));
  EXPECT_FALSE(wpm_is_cjk(0x3042));  // hiragana あ
}

}  // namespace
}  // namespace pagoda
