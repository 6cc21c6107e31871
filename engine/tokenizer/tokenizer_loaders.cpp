// Tokenizer loaders: llama2.c's tokenizer.bin and the tokenizer inside a GGUF file.

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/tokenizer.h"
#include "pagoda/error.h"

namespace pagoda {

namespace {

// Builds the Tokenizer, prefixing any validation error with `where` (the file).
Tokenizer make_tokenizer(TokenizerVocab vocab, const std::string& where) {
  try {
    return Tokenizer(std::move(vocab));
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  }
}

}  // namespace

Tokenizer Tokenizer::from_llama2c(const std::string& path, int32_t vocab_size) {
  if (vocab_size <= 0) {
    throw Error(path + ": tokenizer vocab_size must be positive, got " + std::to_string(vocab_size));
  }
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error(path + ": is a directory, not a tokenizer.bin file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open tokenizer file");
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error(path + ": error reading tokenizer file");

  size_t off = 0;
  auto need = [&](size_t bytes, const std::string& what) {
    if (data.size() - off < bytes) {
      throw Error(path + ": truncated tokenizer file: " + what + " needs " + std::to_string(bytes) +
                  " bytes at offset " + std::to_string(off) + " but the file has " + std::to_string(data.size()));
    }
  };
  // A little-endian int32 or float32 (the file's and the machine's order).
  auto read = [&]<typename T>(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data.data() + off, sizeof(T));
    off += sizeof(T);
    return v;
  };
  auto read_i32 = [&](const std::string& what) { return read.operator()<int32_t>(what); };
  auto read_f32 = [&](const std::string& what) { return read.operator()<float>(what); };

  const int32_t max_len = read_i32("max_token_length");
  if (max_len <= 0) {
    throw Error(path + ": bad tokenizer file: max_token_length is " + std::to_string(max_len));
  }

  TokenizerVocab v;
  const size_t expect = std::min(size_t(vocab_size), data.size() / 8);  // each token takes 8+ bytes
  v.tokens.reserve(expect);
  v.scores.reserve(expect);
  v.types.reserve(expect);
  for (int32_t i = 0; i < vocab_size; ++i) {
    const std::string tok = "token " + std::to_string(i);
    const float score = read_f32(tok + " score");
    const int32_t len = read_i32(tok + " length");
    if (len < 0 || len > max_len) {
      throw Error(path + ": bad tokenizer file: " + tok + " has length " + std::to_string(len) +
                  " (max_token_length is " + std::to_string(max_len) + ")");
    }
    need(size_t(len), tok + " text");
    std::string text = data.substr(off, size_t(len));
    off += size_t(len);

    TokenType type = TokenType::Normal;
    if (text == "<unk>") {
      type = TokenType::Unknown;
    } else if (i == 1 || i == 2 || text == "<s>" || text == "</s>") {
      type = TokenType::Control;  // llama2.c spells BOS/EOS "\n<s>\n" and "\n</s>\n"
    } else if (text.size() == 6 && text.starts_with("<0x") && text.ends_with(">") &&
               std::isxdigit(static_cast<unsigned char>(text[3])) &&
               std::isxdigit(static_cast<unsigned char>(text[4]))) {
      type = TokenType::Byte;
    }
    v.tokens.push_back(std::move(text));
    v.scores.push_back(score);
    v.types.push_back(type);
  }
  if (off != data.size()) {
    throw Error(path + ": tokenizer file has " + std::to_string(data.size() - off) + " bytes left after " +
                std::to_string(vocab_size) + " tokens (is it the tokenizer of a model with another vocabulary size?)");
  }
  v.bos_id = 1;
  v.eos_id = 2;
  v.unk_id = 0;
  v.add_bos = true;
  v.add_space_prefix = true;
  v.space_marker = SpaceMarker::Space;
  return make_tokenizer(std::move(v), path);
}

Tokenizer Tokenizer::from_gguf(const GgufFile& gguf) {
  const std::string& path = gguf.path();
  const std::string model = gguf.get_string("tokenizer.ggml.model");
  if (model != "llama" && model != "gpt2" && model != "bert") {
    throw Error(path + ": tokenizer.ggml.model is \"" + model +
                "\"; only \"llama\" (SentencePiece BPE), \"gpt2\" (byte-level BPE) and \"bert\" (WordPiece) "
                "vocabularies are supported");
  }
  const bool bpe = model == "gpt2";
  const bool wpm = model == "bert";

  TokenizerVocab v;
  if (wpm) {
    v.model = TokenizerModel::Wpm;
    // Only names the pre-tokenizer for llama.cpp's special-token whitespace rules (jina-v2-*).
    v.pre = gguf.get_string_opt("tokenizer.ggml.pre").value_or("default");
  }
  if (bpe) {
    v.model = TokenizerModel::Bpe;
    v.pre = gguf.get_string_opt("tokenizer.ggml.pre").value_or("default");
    if (!gguf.find("tokenizer.ggml.merges")) {
      throw Error(path + ": tokenizer.ggml.merges is missing: a \"gpt2\" (byte-level BPE) vocabulary needs its merges");
    }
    v.merges = gguf.get_string_array("tokenizer.ggml.merges");
  }
  v.tokens = gguf.get_string_array("tokenizer.ggml.tokens");
  const size_t n = v.tokens.size();
  if (n == 0) throw Error(path + ": tokenizer.ggml.tokens is empty");
  if (n > size_t(std::numeric_limits<int32_t>::max())) throw Error(path + ": tokenizer.ggml.tokens is too long");

  if (gguf.find("tokenizer.ggml.scores")) {
    v.scores = gguf.get_float_array("tokenizer.ggml.scores");
    if (v.scores.size() != n) {
      throw Error(path + ": tokenizer.ggml.scores has " + std::to_string(v.scores.size()) + " entries for " +
                  std::to_string(n) + " tokens");
    }
    for (size_t i = 0; i < n; ++i) {
      if (std::isnan(v.scores[i])) throw Error(path + ": tokenizer.ggml.scores[" + std::to_string(i) + "] is NaN");
    }
  } else {
    v.scores.assign(n, 0.0f);
  }

  if (gguf.find("tokenizer.ggml.token_type")) {
    const std::vector<int32_t> types = gguf.get_int32_array("tokenizer.ggml.token_type");
    if (types.size() != n) {
      throw Error(path + ": tokenizer.ggml.token_type has " + std::to_string(types.size()) + " entries for " +
                  std::to_string(n) + " tokens");
    }
    v.types.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      if (types[i] < int32_t(TokenType::Normal) || types[i] > int32_t(TokenType::Byte)) {
        throw Error(path + ": tokenizer.ggml.token_type[" + std::to_string(i) + "] is " + std::to_string(types[i]) +
                    ", not a token type (1..6)");
      }
      v.types.push_back(TokenType(types[i]));
    }
  } else {
    v.types.assign(n, TokenType::Normal);
  }

  auto id = [&](const char* key, int32_t fallback) {
    const std::optional<uint64_t> value = gguf.get_uint_opt(key);
    if (!value) return fallback;
    if (*value >= n) {
      throw Error(path + ": " + key + " is " + std::to_string(*value) + ", outside the vocabulary of " +
                  std::to_string(n) + " tokens");
    }
    return int32_t(*value);
  };
  if (wpm) {
    // llama.cpp's defaults for "bert" are BERT's ids. It reads no cls_token_id and starts with
    // its BOS; converted BERT vocabularies name [CLS] only as cls_token_id, which is the same
    // token, so a file's own [CLS] is honoured when it names no BOS.
    v.bos_id = id("tokenizer.ggml.bos_token_id", id("tokenizer.ggml.cls_token_id", 101));
    v.sep_id = id("tokenizer.ggml.seperator_token_id", 102);
    v.unk_id = id("tokenizer.ggml.unknown_token_id", 100);
    // BERT has no end of sequence; [SEP] is the nearest thing (llama.cpp leaves EOS unset).
    v.eos_id = id("tokenizer.ggml.eos_token_id", v.sep_id);
  } else {
    v.bos_id = id("tokenizer.ggml.bos_token_id", bpe ? 11 : 1);
    v.eos_id = id("tokenizer.ggml.eos_token_id", bpe ? 11 : 2);
    v.unk_id = id("tokenizer.ggml.unknown_token_id", bpe ? -1 : 0);
  }
  v.eot_id = id("tokenizer.ggml.eot_token_id", -1);
  v.eom_id = id("tokenizer.ggml.eom_token_id", -1);
  v.fim_pad_id = id("tokenizer.ggml.fim_pad_token_id", -1);
  v.fim_rep_id = id("tokenizer.ggml.fim_rep_token_id", -1);
  v.fim_sep_id = id("tokenizer.ggml.fim_sep_token_id", -1);
  v.add_bos =
      gguf.get_bool_opt("tokenizer.ggml.add_bos_token").value_or(bpe ? PreTokenizer::adds_bos_by_default(v.pre) : true);
  v.add_eos = gguf.get_bool_opt("tokenizer.ggml.add_eos_token").value_or(false);
  v.add_space_prefix = !bpe && gguf.get_bool_opt("tokenizer.ggml.add_space_prefix").value_or(!wpm);
  v.space_marker = SpaceMarker::Escaped;
  // Names only steer llama.cpp's whitespace rules; a name that is not a string is no name.
  auto name = [&](const char* key) {
    const GgufValue* value = gguf.find(key);
    const std::string* s = value ? std::get_if<std::string>(&value->data) : nullptr;
    return s ? *s : std::string();
  };
  v.model_name = name("general.name");
  v.architecture = name("general.architecture");

  // What is left to check is per token (types spelled right) or, for BPE, names its key
  // (tokenizer.ggml.pre, tokenizer.ggml.merges[i]).
  return make_tokenizer(std::move(v), bpe ? path : path + ": tokenizer.ggml.tokens/token_type");
}

}  // namespace pagoda
