// Fills in tests/data/tokenizer_wpm.json with llama.cpp's answers (not part of the build).
//
// For every case (its "text", or its bytes as "hex" for ill-formed UTF-8), under each of the
// four (add_special, parse_special) settings: llama_tokenize's ids. Also "pieces": the
// concatenation of llama_token_to_piece (lstrip 0, special false) over the ids without
// specials, which is what pagoda's decode gives for a WordPiece vocabulary. A case on which
// llama.cpp throws (a code point past U+10FFFF) gets "llama_cpp_throws" instead. The vocabulary
// is llama.cpp's BGE test vocabulary:
//
//   g++ -std=c++17 -O1 -I. -I$LLAMA/include -I$LLAMA/ggml/include tests/data/tokenizer_wpm_oracle.cpp \
//       -L$LLAMA/build/bin -lllama -Wl,-rpath,$LLAMA/build/bin -o /tmp/wpm-oracle
//   /tmp/wpm-oracle $LLAMA/models/ggml-vocab-bert-bge.gguf tests/data/tokenizer_wpm.json <llama.cpp commit>
//
// (the cases' "runs" and "pieces" are rewritten; their inputs stay as written).

#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "llama.h"
#include "tests/data/llama_oracle.h"

using json = nlohmann::ordered_json;

static std::string pieces(const llama_vocab* v, const std::vector<llama_token>& ids) {
  std::string out;
  for (llama_token id : ids) {
    char buf[256];
    const int n = llama_token_to_piece(v, id, buf, sizeof buf, 0, false);
    if (n < 0) throw std::runtime_error("piece too long");
    out.append(buf, size_t(n));
  }
  return out;
}

static std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out += char(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s VOCAB.gguf CASES.json LLAMA_CPP_COMMIT\n", argv[0]);
    return 2;
  }
  json doc = json::parse(read_all(argv[2]));

  llama_model* model = load_vocab_only(argv[1]);
  if (!model) return 1;
  const llama_vocab* v = llama_model_get_vocab(model);

  doc["llama_cpp_commit"] = argv[3];
  for (json& c : doc["cases"]) {
    c.erase("runs");
    c.erase("pieces");
    c.erase("llama_cpp_throws");
    const std::string text = c.contains("text") ? c["text"].get<std::string>() : from_hex(c["hex"].get<std::string>());
    try {
      json runs = json::array();
      for (bool add_special : {false, true}) {
        for (bool parse_special : {false, true}) {
          runs.push_back({{"add_special", add_special},
                          {"parse_special", parse_special},
                          {"ids", tokenize(v, text, add_special, parse_special)}});
        }
      }
      c["pieces"] = pieces(v, runs[0]["ids"].get<std::vector<llama_token>>());
      c["runs"] = runs;
    } catch (const std::exception& e) {
      c["llama_cpp_throws"] = e.what();
    }
  }

  std::ofstream(argv[2], std::ios::binary) << doc.dump(1) << "\n";
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
