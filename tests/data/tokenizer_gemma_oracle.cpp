// Fills in tests/data/tokenizer_gemma.json with llama.cpp's answers (not part of the build).
//
// For every case (its "text", or llama-spm .inp case number "inp"), under each of the four
// (add_special, parse_special) settings: llama_tokenize's ids and, when it differs from the
// case's text, llama_detokenize's text (remove_special and unparse_special false). For every chat:
// llama_chat_apply_template's "gemma" prompt, and its ids with add_special and with / without parse_special. Also the
// ids llama_vocab_is_eog accepts. The vocabulary is the one tests/test_tokenizer_gemma.cpp builds:
//
//   PAGODA_WRITE_GEMMA_VOCAB=/tmp/gemma.gguf build/tests/test_tokenizer_gemma --gtest_filter='*Loads*'
//   g++ -std=c++17 -O1 -I. -I$LLAMA/include -I$LLAMA/ggml/include tests/data/tokenizer_gemma_oracle.cpp \
//       -L$LLAMA/build/bin -lllama -Wl,-rpath,$LLAMA/build/bin -o /tmp/gemma-oracle
//   /tmp/gemma-oracle /tmp/gemma.gguf ../shared/vocab/ggml-vocab-llama-spm.gguf.inp \
//       tests/data/tokenizer_gemma.json <llama.cpp commit>
//
// (the file's "eog" and "runs"/"ids" are rewritten; the cases' inputs stay as written).

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "llama.h"
#include "tests/data/llama_oracle.h"

using json = nlohmann::ordered_json;

static std::string detokenize(const llama_vocab* v, const std::vector<llama_token>& ids) {
  std::string text(ids.size() * 16 + 16, '\0');
  int n = llama_detokenize(v, ids.data(), int32_t(ids.size()), text.data(), int32_t(text.size()), false, false);
  if (n < 0) {
    text.resize(size_t(-n));
    n = llama_detokenize(v, ids.data(), int32_t(ids.size()), text.data(), int32_t(text.size()), false, false);
  }
  text.resize(size_t(n));
  return text;
}

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s VOCAB.gguf LLAMA_SPM.inp CASES.json LLAMA_CPP_COMMIT\n", argv[0]);
    return 2;
  }
  std::vector<std::string> inp;
  {
    const std::string text = read_all(argv[2]), sep = "\n__ggml_vocab_test__\n";
    size_t from = 0;
    for (size_t hit; (hit = text.find(sep, from)) != std::string::npos; from = hit + sep.size()) {
      inp.push_back(text.substr(from, hit - from));
    }
  }
  json doc = json::parse(read_all(argv[3]));

  llama_model* model = load_vocab_only(argv[1]);
  if (!model) return 1;
  const llama_vocab* v = llama_model_get_vocab(model);

  doc["llama_cpp_commit"] = argv[4];
  json eog = json::array();
  for (llama_token id = 0; id < llama_vocab_n_tokens(v); ++id) {
    if (llama_vocab_is_eog(v, id)) eog.push_back(id);
  }
  doc["eog"] = eog;

  for (json& c : doc["cases"]) {
    const std::string text = c.contains("text") ? c["text"].get<std::string>() : inp.at(c["inp"].get<size_t>());
    json runs = json::array();
    for (bool add_special : {false, true}) {
      for (bool parse_special : {false, true}) {
        const std::vector<llama_token> ids = tokenize(v, text, add_special, parse_special);
        json run = {{"add_special", add_special}, {"parse_special", parse_special}, {"ids", ids}};
        // Only when it is not the case's own text (which keeps the .inp cases out of the file).
        if (const std::string back = detokenize(v, ids); back != text) run["text"] = back;
        runs.push_back(run);
      }
    }
    c["runs"] = runs;
  }

  for (json& c : doc["chats"]) {
    std::vector<std::string> roles, contents;
    for (const json& m : c["messages"]) {
      roles.push_back(m["role"].get<std::string>());
      contents.push_back(m["content"].get<std::string>());
    }
    std::vector<llama_chat_message> msgs;
    for (size_t i = 0; i < roles.size(); ++i) msgs.push_back({roles[i].c_str(), contents[i].c_str()});
    std::string out(4096, '\0');
    const int n = llama_chat_apply_template("gemma", msgs.data(), msgs.size(), true, out.data(), int32_t(out.size()));
    if (n < 0 || n > int(out.size())) return 1;
    out.resize(size_t(n));
    c["llama_cpp_prompt"] = out;
    c["ids"] = tokenize(v, out, true, true);
    c["ids_unparsed"] = tokenize(v, out, true, false);
  }

  std::ofstream(argv[3], std::ios::binary) << doc.dump(1) << "\n";
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
