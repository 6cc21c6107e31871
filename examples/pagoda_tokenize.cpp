// pagoda-tokenize: a GGUF vocabulary's token ids for text, in llama.cpp's test format. Works on
// vocab-only GGUFs (no tensors): the tokenizer is built straight from the file's metadata.

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/tokenizer.h"
#include "examples/common/args.h"
#include "pagoda/error.h"

namespace {

constexpr const char* kUsage = R"(usage: pagoda-tokenize -m FILE.gguf (--inp CASES.inp | -p TEXT) [--special] [--bos]

Prints token ids, each preceded by one space, one line per text (llama.cpp's .out format).

  -m, --model FILE    a GGUF file with a tokenizer (a vocab-only one will do)
  --inp FILE          llama.cpp test cases: each case followed by "\n__ggml_vocab_test__\n"
  -p, --prompt TEXT   one text
  --special           parse control tokens written in the text ("<|im_start|>") into their ids
  --bos               put BOS first when the vocabulary says to (tokenizer.ggml.add_bos_token)
  -h, --help          this text
)";

constexpr std::string_view kSeparator = "\n__ggml_vocab_test__\n";

// The cases of a .inp file, in order.
std::vector<std::string> read_cases(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw pagoda::Error(path + ": cannot open test cases");
  std::ostringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  std::vector<std::string> cases;
  size_t from = 0;
  for (size_t hit; (hit = text.find(kSeparator, from)) != std::string::npos; from = hit + kSeparator.size()) {
    cases.push_back(text.substr(from, hit - from));
  }
  if (from < text.size()) cases.push_back(text.substr(from));  // a last case without its separator
  return cases;
}

std::string ids_line(const std::vector<int32_t>& ids) {
  std::string line;
  for (int32_t id : ids) line += " " + std::to_string(id);
  return line;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    pagoda::cli::Args args(argc, argv, {"--model", "--inp", "--prompt"}, {"--special", "--bos", "--help"},
                           {{"-p", "--prompt"}});
    if (args.has("--help")) {
      std::cout << kUsage;
      return 0;
    }
    const auto model = args.get("--model");
    if (!model) throw pagoda::Error("-m FILE.gguf is required (see --help)");
    if (args.has("--inp") == args.has("--prompt"))
      throw pagoda::Error("give either --inp FILE or -p TEXT (see --help)");

    const pagoda::Tokenizer tok = pagoda::Tokenizer::from_gguf(pagoda::GgufFile::open(*model));
    const bool parse_special = args.has("--special");
    const bool add_bos = args.has("--bos") && tok.add_bos();
    const std::vector<std::string> texts = args.has("--inp") ? read_cases(*args.get("--inp")) : args.all("--prompt");
    std::string out;
    for (const std::string& text : texts) out += ids_line(tok.encode(text, add_bos, parse_special)) + "\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pagoda-tokenize: %s\n", e.what());
    return 1;
  }
}
