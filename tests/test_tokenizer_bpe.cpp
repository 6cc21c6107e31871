// Byte-level BPE and the real vocabularies: every vocabulary in ../shared/vocab gives
// llama.cpp's ids on its test cases (in process and through pagoda-tokenize), decoding gives
// the text back, special tokens parse on request, the llamacpp-quant models tokenize their
// prompts as llama.cpp did and have its end-of-generation sets, and bad BPE metadata is an
// error naming the key.

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <functional>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/tokenizer/byte_unicode.h"
#include "engine/tokenizer/pre_tokenizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "pagoda/error.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

namespace fs = std::filesystem;

const std::string kVocabDir = std::string(PAGODA_SHARED_DIR) + "/vocab";
const std::string kQuantDir = std::string(PAGODA_SHARED_DIR) + "/models/llamacpp-quant";

std::string vocab_file(const std::string& name) { return kVocabDir + "/ggml-vocab-" + name + ".gguf"; }

// One Tokenizer per vocabulary for the whole program (the big ones take a moment to load).
const Tokenizer& vocab(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> loaded;
  auto& t = loaded[name];
  if (!t) t = std::make_unique<Tokenizer>(Tokenizer::from_gguf(GgufFile::open(vocab_file(name))));
  return *t;
}

class VocabCases : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!fs::exists(vocab_file(GetParam()) + ".out")) GTEST_SKIP() << kVocabDir << " is absent: no vocabularies";
  }
};

TEST_P(VocabCases, EncodesLikeLlamaCpp) {
  const std::string f = vocab_file(GetParam());
  const auto cases = test::read_vocab_cases(f + ".inp");
  const auto want = test::read_vocab_ids(f + ".out");
  ASSERT_EQ(cases.size(), 46u);
  ASSERT_EQ(want.size(), cases.size());
  const Tokenizer& tok = vocab(GetParam());
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(tok.encode(cases[i], false), want[i]) << GetParam() << " case " << i << ": \"" << cases[i] << "\"";
  }
}

TEST_P(VocabCases, PagodaTokenizePrintsTheOutFile) {
  const std::string f = vocab_file(GetParam());
  const std::string exe = std::string(PAGODA_BINARY_DIR) + "/examples/pagoda-tokenize";
  ASSERT_TRUE(fs::exists(exe)) << exe << " is not built";
  const std::string out = test::scratch_path("tokenize-" + GetParam() + ".out");
  const std::string cmd = "'" + exe + "' -m '" + f + "' --inp '" + f + ".inp' > '" + out + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  EXPECT_EQ(test::read_file(out), test::read_file(f + ".out"));
}

TEST_P(VocabCases, DecodingGivesTheTextBack) {
  const Tokenizer& tok = vocab(GetParam());
  const bool spm = tok.model() == TokenizerModel::Spm;
  for (const std::string& text : test::read_vocab_cases(vocab_file(GetParam()) + ".inp")) {
    // SentencePiece drops the dummy prefix again, which eats a space the text itself began with.
    if (spm && text.starts_with(' ')) continue;
    EXPECT_EQ(tok.decode(tok.encode(text, false)), text) << GetParam() << ": \"" << text << "\"";
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, VocabCases,
                         ::testing::Values("llama-spm", "gpt-2", "deepseek-llm", "llama-bpe", "qwen2"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return n;
                         });

#define SKIP_WITHOUT(path)                                         \
  do {                                                             \
    if (!fs::exists(path)) GTEST_SKIP() << (path) << " is absent"; \
  } while (0)

TEST(BpeVocab, SpecialTokensParseOnlyOnRequest) {
  SKIP_WITHOUT(vocab_file("llama-bpe"));
  const Tokenizer& l3 = vocab("llama-bpe");
  const std::string chat = "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>";
  const std::vector<int32_t> parsed = l3.encode(chat, true, true);
  ASSERT_GE(parsed.size(), 5u);
  EXPECT_EQ(parsed.front(), 128000);
  EXPECT_EQ(parsed[1], l3.find_piece("<|start_header_id|>"));
  EXPECT_EQ(parsed.back(), l3.find_piece("<|eot_id|>"));
  EXPECT_TRUE(l3.is_eog(parsed.back()));
  for (int32_t id : l3.encode(chat, false)) EXPECT_LT(id, 128000) << "a special id from plain text";
  EXPECT_EQ(l3.decode(l3.encode(chat, false)), chat);

  SKIP_WITHOUT(vocab_file("qwen2"));
  const Tokenizer& qw = vocab("qwen2");
  const int32_t think = qw.find_piece("<think>"), im_start = qw.find_piece("<|im_start|>");
  ASSERT_EQ(qw.vocab().types[size_t(think)], TokenType::UserDefined);
  for (bool parse : {false, true}) {
    const std::vector<int32_t> ids = qw.encode("<|im_start|>a<think>b", false, parse);
    EXPECT_EQ(std::count(ids.begin(), ids.end(), think), 1) << parse;
    EXPECT_EQ(std::count(ids.begin(), ids.end(), im_start), parse ? 1 : 0) << parse;
  }
  // <|endoftext|>, <|im_end|>, <|fim_pad|>, <|repo_name|>, <|file_sep|>, and the ordinary
  // "</s>" (128247), which llama.cpp now also ends generation at by its text.
  EXPECT_EQ(qw.eog_ids(), (std::vector<int32_t>{128247, 151643, 151645, 151662, 151663, 151664}));
}

TEST(BpeVocab, LlamaCppModelsTokenizeTheirPromptsAndStopAtTheirEogSets) {
  SKIP_WITHOUT(kQuantDir + "/l3v-F32.gguf");
  // The sets llama.cpp printed for these files (the directory's README).
  const std::map<std::string, std::vector<int32_t>> eog = {{"l3v", {2049, 2057}},
                                                           {"q2v", {2048, 2050, 2067, 2068, 2069}}};
  for (const auto& [name, want_eog] : eog) {
    const Tokenizer tok = Tokenizer::from_gguf(GgufFile::open(kQuantDir + "/" + name + "-F32.gguf"));
    EXPECT_EQ(tok.eog_ids(), want_eog) << name;
    // llama.cpp tokenized the prompts with add_special: BOS for l3v, none for q2v.
    std::ifstream lines(kQuantDir + "/" + name + "-F32.greedy.jsonl");
    int n = 0;
    for (std::string line; std::getline(lines, line); ++n) {
      const auto j = nlohmann::json::parse(line);
      EXPECT_EQ(tok.encode(j["prompt"].get<std::string>(), tok.add_bos()), j["prompt_ids"].get<std::vector<int32_t>>())
          << name << ": " << j["prompt"];
    }
    EXPECT_EQ(n, 6) << name;
  }
}

TEST(BpeVocab, InvalidUtf8IsRepairedAsLlamaCppDoes) {
  SKIP_WITHOUT(vocab_file("gpt-2"));
  const Tokenizer& tok = vocab("gpt-2");
  // A stray continuation byte is one U+FFFD; a truncated sequence one per byte (its lead, then
  // the continuation left alone); an overlong '/' is '/'.
  EXPECT_EQ(well_formed_utf8("a\x80"
                             "b\xE2\x82"),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(well_formed_utf8("\xC0\xAF"), "/");
  EXPECT_EQ(tok.encode("a\x80"
                       "b",
                       false),
            tok.encode("a\xEF\xBF\xBD"
                       "b",
                       false));
}

TEST(ByteUnicode, IsGpt2sAlphabetAndRoundTrips) {
  EXPECT_EQ(byte_to_unicode(' '), "\xC4\xA0");   // Ġ
  EXPECT_EQ(byte_to_unicode('\n'), "\xC4\x8A");  // Ċ
  EXPECT_EQ(byte_to_unicode('A'), "A");
  EXPECT_EQ(byte_to_unicode(0xAD), "\xC5\x83");  // the 68th remapped byte: U+0143
  std::string all;
  for (int b = 0; b < 256; ++b) all += char(b);
  std::string spelled;
  append_byte_level(all, spelled);
  EXPECT_EQ(decode_byte_level(spelled), all);
}

TEST(PreTokenizer, SplitsLikeTheRegexesInTurn) {
  auto split = [](const std::string& name, std::string_view text) {
    std::vector<std::string_view> pieces;
    PreTokenizer(name).split(text, pieces);
    return std::vector<std::string>(pieces.begin(), pieces.end());
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(split("gpt-2", "Hello world's  123"), (V{"Hello", " world", "'s", " ", " 123"}));
  EXPECT_EQ(split("llama-bpe", "I'M 12345!!\n\n x"), (V{"I", "'M", " ", "123", "45", "!!\n\n", " x"}));
  EXPECT_EQ(split("qwen2", "ab 123"), (V{"ab", " ", "1", "2", "3"}));
  // smollm splits digits first, then GPT-2's expression runs inside the pieces left.
  EXPECT_EQ(split("smollm", "a 12"), (V{"a", " ", "1", "2"}));
  EXPECT_TRUE(split("qwen2", "").empty());
}

// A tiny byte-level vocabulary as a GGUF, with `tweak` applied before writing.
std::string write_bpe_gguf(const std::string& name, const std::function<void(GgufWriter&)>& tweak) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "gpt-2");
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(byte_to_unicode(uint8_t(b)));
  tokens.push_back("ab");
  tokens.push_back("<|endoftext|>");
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_string_array("tokenizer.ggml.merges", {"a b"});
  w.set_u32("tokenizer.ggml.bos_token_id", 257);
  w.set_u32("tokenizer.ggml.eos_token_id", 257);
  if (tweak) tweak(w);
  const std::string path = test::scratch_path(name);
  w.write(path);
  return path;
}

void expect_error_naming(const std::string& path, const std::vector<std::string>& parts) {
  try {
    Tokenizer::from_gguf(GgufFile::open(path));
    ADD_FAILURE() << "no pagoda::Error for " << path;
  } catch (const Error& e) {
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(BpeVocab, SmallVocabularyMergesAndDecodes) {
  const Tokenizer tok = Tokenizer::from_gguf(GgufFile::open(write_bpe_gguf("bpe-ok.gguf", {})));
  EXPECT_EQ(tok.model(), TokenizerModel::Bpe);
  EXPECT_FALSE(tok.add_bos());  // gpt-2's default
  EXPECT_EQ(tok.encode("ab a", false), (std::vector<int32_t>{256, ' ', 'a'}));
  EXPECT_EQ(tok.decode(std::vector<int32_t>{256, ' ', 'a', 257}), "ab a");
  EXPECT_EQ(tok.eog_ids(), (std::vector<int32_t>{257}));
}

TEST(BpeVocab, BadMetadataNamesTheKey) {
  std::string p = write_bpe_gguf("bpe-pre.gguf", [](GgufWriter& w) { w.set_string("tokenizer.ggml.pre", "klingon"); });
  expect_error_naming(p, {p, "tokenizer.ggml.pre", "klingon"});
  {
    GgufWriter w;
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string_array("tokenizer.ggml.tokens", {"a", "b"});
    p = test::scratch_path("bpe-nomerges.gguf");
    w.write(p);
    expect_error_naming(p, {p, "tokenizer.ggml.merges"});
  }
  p = write_bpe_gguf("bpe-unknown.gguf", [](GgufWriter& w) {
    w.set_string_array("tokenizer.ggml.merges", {"a b", "a zz"});
  });
  expect_error_naming(p, {p, "tokenizer.ggml.merges[1]", "zz"});
  p = write_bpe_gguf("bpe-result.gguf", [](GgufWriter& w) { w.set_string_array("tokenizer.ggml.merges", {"b a"}); });
  expect_error_naming(p, {p, "tokenizer.ggml.merges[0]", "ba"});
  p = write_bpe_gguf("bpe-nospace.gguf", [](GgufWriter& w) { w.set_string_array("tokenizer.ggml.merges", {"ab"}); });
  expect_error_naming(p, {p, "tokenizer.ggml.merges[0]"});
}

}  // namespace
}  // namespace pagoda
