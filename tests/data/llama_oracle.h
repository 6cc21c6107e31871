#pragma once
// What the tokenizer oracles (tests/data/*_oracle.cpp, built by hand against a llama.cpp
// checkout, never by CMake) share: a file's bytes, a vocabulary loaded alone, and llama_tokenize
// with its retry on a short buffer.

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

inline std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A GGUF's vocabulary alone (no weights), after llama_backend_init; nullptr when it will not load.
inline llama_model* load_vocab_only(const char* path) {
  llama_backend_init();
  llama_model_params params = llama_model_default_params();
  params.vocab_only = true;
  return llama_model_load_from_file(path, params);
}

inline std::vector<llama_token> tokenize(const llama_vocab* v, const std::string& text, bool add_special,
                                         bool parse_special) {
  std::vector<llama_token> ids(text.size() + 8);
  int n =
      llama_tokenize(v, text.data(), int32_t(text.size()), ids.data(), int32_t(ids.size()), add_special, parse_special);
  if (n < 0) {
    ids.resize(size_t(-n));
    n = llama_tokenize(v, text.data(), int32_t(text.size()), ids.data(), int32_t(ids.size()), add_special,
                       parse_special);
  }
  ids.resize(size_t(n));
  return ids;
}
