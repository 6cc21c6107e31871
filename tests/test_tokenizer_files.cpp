// Tokenizer files: llama2.c's tokenizer.bin and a GGUF's tokenizer.ggml.* metadata, loaded with
// their defaults and options, and malformed ones refused with errors naming the file and key.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/tokenizer/tokenizer.h"
#include "pagoda/error.h"
#include "support/vocab_support.h"

namespace pagoda {
namespace {

namespace fs = std::filesystem;

using test::id_of;
using test::kWords;
using test::make_vocab;

// ---------------------------------------------------------------------------------------------
// llama2.c tokenizer.bin files.

class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = fs::temp_directory_path() / ("pagoda_tok_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

void put_i32(std::string& s, int32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); }
void put_f32(std::string& s, float v) { s.append(reinterpret_cast<const char*>(&v), 4); }

struct BinToken {
  std::string text;
  float score;
};

std::string make_bin(const std::vector<BinToken>& toks, int32_t max_len = -1) {
  if (max_len < 0) {
    max_len = 0;
    for (const auto& t : toks) max_len = std::max(max_len, int32_t(t.text.size()));
  }
  std::string s;
  put_i32(s, max_len);
  for (const auto& t : toks) {
    put_f32(s, t.score);
    put_i32(s, int32_t(t.text.size()));
    s += t.text;
  }
  return s;
}

void write_file(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), std::streamsize(data.size()));
}

const std::vector<BinToken> kBinTokens = {
    {"<unk>", 0}, {"\n<s>\n", 0}, {"\n</s>\n", 0}, {"<0x41>", 0}, {"<0xe9>", 0}, {" ", -1},
    {"a", -2},    {"b", -3},      {" a", -4},      {"ab", -5},    {" ab", -6},
};

// `stmt` throws a pagoda::Error whose message contains each of the texts after it.
#define EXPECT_ERROR_NAMING(stmt, ...)                                                                    \
  do {                                                                                                    \
    try {                                                                                                 \
      stmt;                                                                                               \
      ADD_FAILURE() << "no pagoda::Error from " #stmt;                                                    \
    } catch (const Error& e) {                                                                            \
      for (const std::string& text : std::initializer_list<std::string>{__VA_ARGS__}) {                   \
        EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << text << " not in " << e.what(); \
      }                                                                                                   \
    }                                                                                                     \
  } while (0)

TEST(TokenizerBin, LoadsAndDerivesTypes) {
  TempDir dir;
  const std::string path = dir.file("tok.bin");
  write_file(path, make_bin(kBinTokens));
  Tokenizer tok = Tokenizer::from_llama2c(path, int32_t(kBinTokens.size()));
  const auto& v = tok.vocab();
  EXPECT_EQ(v.types[0], TokenType::Unknown);
  EXPECT_EQ(v.types[1], TokenType::Control);
  EXPECT_EQ(v.types[2], TokenType::Control);
  EXPECT_EQ(v.types[3], TokenType::Byte);
  EXPECT_EQ(v.types[4], TokenType::Byte);  // lower-case hex, as llama2.c's sscanf accepts
  EXPECT_EQ(v.types[5], TokenType::Normal);
  EXPECT_EQ(v.space_marker, SpaceMarker::Space);
  EXPECT_EQ(tok.token_text(4), "\xE9");
  EXPECT_EQ(tok.encode("ab a", true), (std::vector<int32_t>{1, 10, 8}));
  EXPECT_EQ(tok.decode(tok.encode("ab a", true)), "ab a");
  EXPECT_EQ(tok.encode("c", false), (std::vector<int32_t>{5, 0}));  // no <0x63>: unknown
}

TEST(TokenizerBin, MalformedFilesThrowErrorsNamingThePath) {
  TempDir dir;
  const std::string good = make_bin(kBinTokens);
  const int32_t n = int32_t(kBinTokens.size());
  const std::string path = dir.file("bad_tokenizer.bin");

  // Truncated at every offset.
  for (size_t cut = 0; cut < good.size(); ++cut) {
    write_file(path, good.substr(0, cut));
    EXPECT_ERROR_NAMING(Tokenizer::from_llama2c(path, n), path);
  }
  // Trailing bytes, or a vocab_size that does not match the file.
  write_file(path, good + "x");
  EXPECT_ERROR_NAMING(Tokenizer::from_llama2c(path, n), path);
  write_file(path, good);
  EXPECT_NO_THROW(Tokenizer::from_llama2c(path, n));
  EXPECT_ERROR_NAMING(Tokenizer::from_llama2c(path, n - 1), path);
  EXPECT_ERROR_NAMING(Tokenizer::from_llama2c(path, n + 1), path);
  EXPECT_ERROR_NAMING(Tokenizer::from_llama2c(path, 0), path);
  EXPECT_ERROR_NAMING(Tokenizer::from_llama2c(path, -5), path);
  EXPECT_ERROR_NAMING(Tokenizer::from_llama2c(path, std::numeric_limits<int32_t>::max()), path);

  // Bad lengths: negative, absurd, longer than max_token_length; a bad max_token_length.
  const size_t len_at = 4 + 4;  // first token's length field
  for (int32_t bad :
       {-1, -100000, std::numeric_limits<int32_t>::min(), 7, 1 << 30, std::numeric_limits<int32_t>::max()}) {
    std::string data = good;
    std::memcpy(data.data() + len_at, &bad, 4);
    write_file(path, data);
    EXPECT_ERROR_NAMING(Tokenizer::from_llama2c(path, n), path);
  }
  for (int32_t bad : {0, -1, std::numeric_limits<int32_t>::min()}) {
    std::string data = good;
    std::memcpy(data.data(), &bad, 4);
    write_file(path, data);
    EXPECT_ERROR_NAMING(Tokenizer::from_llama2c(path, n), path);
  }
  // A huge max_token_length with a length that runs past the end of the file.
  {
    std::string data = make_bin(kBinTokens, std::numeric_limits<int32_t>::max());
    const int32_t huge = 1 << 30;
    std::memcpy(data.data() + len_at, &huge, 4);
    write_file(path, data);
    EXPECT_ERROR_NAMING(Tokenizer::from_llama2c(path, n), path);
  }
  // NaN scores, a byte token missing, a missing file, a directory.
  {
    auto toks = kBinTokens;
    toks[6].score = std::numeric_limits<float>::quiet_NaN();
    write_file(path, make_bin(toks));
    EXPECT_ERROR_NAMING(Tokenizer::from_llama2c(path, n), path);
  }
  {
    write_file(path, make_bin({{"<unk>", 0}, {"<s>", 0}}));  // BOS ok, EOS (2) out of range
    EXPECT_ERROR_NAMING(Tokenizer::from_llama2c(path, 2), path);
  }
  EXPECT_ERROR_NAMING(Tokenizer::from_llama2c(dir.file("missing.bin"), n), dir.file("missing.bin"));
  EXPECT_ERROR_NAMING(Tokenizer::from_llama2c(dir.file(""), n), dir.file(""));

  // Random corruption never crashes: either it loads or it throws a pagoda::Error.
  std::mt19937_64 rng(99);
  for (int i = 0; i < 500; ++i) {
    std::string data = good;
    const int flips = 1 + int(rng() % 4);
    for (int f = 0; f < flips; ++f) data[rng() % data.size()] = char(rng());
    write_file(path, data);
    try {
      Tokenizer t = Tokenizer::from_llama2c(path, n);
      (void)t.encode("ab a b", true);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The tokenizer inside a GGUF file.

struct GgufTokSpec {
  bool model = true, tokens = true, scores = true, types = true;
};

// A GGUF file with a small "llama" vocabulary (GGUF spelling: "▁"), tweaked by `tweak`.
std::string write_tok_gguf(const TempDir& dir, const std::string& name, GgufTokSpec spec,
                           const std::function<void(GgufWriter&)>& tweak = {}) {
  const TokenizerVocab v = make_vocab(kWords, true);
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  if (spec.model) w.set_string("tokenizer.ggml.model", "llama");
  if (spec.tokens) w.set_string_array("tokenizer.ggml.tokens", v.tokens);
  if (spec.scores) w.set_f32_array("tokenizer.ggml.scores", v.scores);
  if (spec.types) {
    std::vector<int32_t> types;
    for (TokenType t : v.types) types.push_back(int32_t(t));
    w.set_i32_array("tokenizer.ggml.token_type", std::move(types));
  }
  if (tweak) tweak(w);
  const std::string path = dir.file(name);
  w.write(path);
  return path;
}

TEST(TokenizerGguf, LoadsWithDefaultsAndOptions) {
  TempDir dir;
  {
    // Only the model and the tokens: scores 0, every token Normal, ids 1/2/0, BOS and prefix on.
    Tokenizer tok = Tokenizer::from_gguf(GgufFile::open(write_tok_gguf(dir, "min.gguf", {true, true, false, false})));
    EXPECT_EQ(tok.vocab_size(), int32_t(make_vocab(kWords).tokens.size()));
    EXPECT_EQ(tok.bos_id(), 1);
    EXPECT_EQ(tok.eos_id(), 2);
    EXPECT_EQ(tok.unk_id(), 0);
    EXPECT_TRUE(tok.add_bos());
    EXPECT_TRUE(tok.add_space_prefix());
    EXPECT_EQ(tok.vocab().space_marker, SpaceMarker::Escaped);
    for (float s : tok.vocab().scores) EXPECT_EQ(s, 0.0f);
    // Every token Normal, but "</s>": llama.cpp makes it Control by its text (an EOG token).
    for (size_t i = 0; i < tok.vocab().types.size(); ++i) {
      EXPECT_EQ(tok.vocab().types[i], tok.vocab().tokens[i] == "</s>" ? TokenType::Control : TokenType::Normal) << i;
    }
    EXPECT_EQ(tok.token_text(1), "<s>");  // a Normal token now: its text
  }
  {
    Tokenizer tok = Tokenizer::from_gguf(GgufFile::open(write_tok_gguf(dir, "full.gguf", {}, [](GgufWriter& w) {
      w.set_u32("tokenizer.ggml.bos_token_id", 2);
      w.set_u32("tokenizer.ggml.eos_token_id", 1);
      w.set_u32("tokenizer.ggml.unknown_token_id", 0);
      w.set_bool("tokenizer.ggml.add_bos_token", false);
      w.set_bool("tokenizer.ggml.add_space_prefix", false);
    })));
    EXPECT_EQ(tok.bos_id(), 2);
    EXPECT_EQ(tok.eos_id(), 1);
    EXPECT_FALSE(tok.add_bos());
    EXPECT_FALSE(tok.add_space_prefix());
    EXPECT_EQ(tok.encode("hello", true), (std::vector<int32_t>{2, id_of(tok, "hello")}));
    Tokenizer same(make_vocab(kWords));
    EXPECT_EQ(tok.encode(" hello world!", false), same.encode("hello world!", false));
  }
}

TEST(TokenizerGguf, BadTokenizerMetadataNamesFileAndKey) {
  TempDir dir;
  auto load = [](const std::string& path) { return Tokenizer::from_gguf(GgufFile::open(path)); };
  std::string p = write_tok_gguf(dir, "nomodel.gguf", {false, true, true, true});
  EXPECT_ERROR_NAMING(load(p), p, "tokenizer.ggml.model");
  p = write_tok_gguf(dir, "t5.gguf", {}, [](GgufWriter& w) { w.set_string("tokenizer.ggml.model", "t5"); });
  EXPECT_ERROR_NAMING(load(p), p, "tokenizer.ggml.model");
  p = write_tok_gguf(dir, "notokens.gguf", {true, false, false, false});
  EXPECT_ERROR_NAMING(load(p), p, "tokenizer.ggml.tokens");
  p = write_tok_gguf(dir, "emptytokens.gguf", {true, false, false, false},
                     [](GgufWriter& w) { w.set_string_array("tokenizer.ggml.tokens", {}); });
  EXPECT_ERROR_NAMING(load(p), p, "tokenizer.ggml.tokens");
  p = write_tok_gguf(dir, "fewscores.gguf", {}, [](GgufWriter& w) {
    w.set_f32_array("tokenizer.ggml.scores", {0, 1});
  });
  EXPECT_ERROR_NAMING(load(p), p, "tokenizer.ggml.scores");
  p = write_tok_gguf(dir, "nanscore.gguf", {}, [](GgufWriter& w) {
    std::vector<float> s(make_vocab(kWords).tokens.size(), 0.0f);
    s[4] = std::numeric_limits<float>::quiet_NaN();
    w.set_f32_array("tokenizer.ggml.scores", s);
  });
  EXPECT_ERROR_NAMING(load(p), p, "tokenizer.ggml.scores");
  p = write_tok_gguf(dir, "strscores.gguf", {}, [](GgufWriter& w) { w.set_string("tokenizer.ggml.scores", "x"); });
  EXPECT_ERROR_NAMING(load(p), p, "tokenizer.ggml.scores");
  p = write_tok_gguf(dir, "fewtypes.gguf", {},
                     [](GgufWriter& w) { w.set_i32_array("tokenizer.ggml.token_type", {1}); });
  EXPECT_ERROR_NAMING(load(p), p, "tokenizer.ggml.token_type");
  p = write_tok_gguf(dir, "badtype.gguf", {}, [](GgufWriter& w) {
    std::vector<int32_t> t(make_vocab(kWords).tokens.size(), 1);
    t[7] = 9;
    w.set_i32_array("tokenizer.ggml.token_type", t);
  });
  EXPECT_ERROR_NAMING(load(p), p, "tokenizer.ggml.token_type");
  p = write_tok_gguf(dir, "bytetype.gguf", {}, [](GgufWriter& w) {
    std::vector<int32_t> t(make_vocab(kWords).tokens.size(), 1);
    t.back() = 6;  // a Byte token spelled " h"
    w.set_i32_array("tokenizer.ggml.token_type", t);
  });
  EXPECT_ERROR_NAMING(load(p), p, "tokenizer.ggml.token");
  for (const char* key :
       {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id"}) {
    p = write_tok_gguf(dir, "badid.gguf", {}, [&](GgufWriter& w) { w.set_u32(key, 100000); });
    EXPECT_ERROR_NAMING(load(p), p, key);
    p = write_tok_gguf(dir, "negid.gguf", {}, [&](GgufWriter& w) { w.set_i32(key, -1); });
    EXPECT_ERROR_NAMING(load(p), p, key);
    p = write_tok_gguf(dir, "strid.gguf", {}, [&](GgufWriter& w) { w.set_string(key, "1"); });
    EXPECT_ERROR_NAMING(load(p), p, key);
  }
  p = write_tok_gguf(dir, "strbool.gguf", {},
                     [](GgufWriter& w) { w.set_string("tokenizer.ggml.add_bos_token", "yes"); });
  EXPECT_ERROR_NAMING(load(p), p, "tokenizer.ggml.add_bos_token");
}

}  // namespace
}  // namespace pagoda
