// Tokenizers on arbitrary bytes, with the real vocabularies in ../shared/vocab (and llama.cpp's
// BGE WordPiece vocabulary from its snapshot in /tmp/llama.cpp when ../shared lacks it): the first input
// byte picks a vocabulary; the rest is encoded as text, then read again as token ids for the
// whole-sequence and streaming decoders. Special tokens are parsed and not. Invariants checked: ids are in the
// vocabulary, the stream decoder emits exactly what decode() returns, and its output is valid UTF-8.

#include <cstring>
#include <memory>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

const std::vector<std::unique_ptr<pagoda::Tokenizer>>& tokenizers() {
  static const auto loaded = [] {
    std::vector<std::unique_ptr<pagoda::Tokenizer>> out;
    for (const char* name : {"llama-spm", "gpt-2", "llama-bpe", "qwen2", "deepseek-llm", "bert-bge"}) {
      const std::string file = "ggml-vocab-" + std::string(name) + ".gguf";
      std::string path = pagoda::fuzz::shared_file(("vocab/" + file).c_str());
      if (path.empty() && access(("/tmp/llama.cpp/models/" + file).c_str(), R_OK) == 0) {
        path = "/tmp/llama.cpp/models/" + file;
      }
      if (path.empty()) continue;
      try {
        out.push_back(std::make_unique<pagoda::Tokenizer>(pagoda::Tokenizer::from_gguf(pagoda::GgufFile::open(path))));
      } catch (const pagoda::Error& e) {
        std::fprintf(stderr, "fuzz_tokenizer: skipping %s: %s\n", name, e.what());
      }
    }
    if (out.empty()) std::fprintf(stderr, "fuzz_tokenizer: no vocabulary in ../shared/vocab; nothing to fuzz\n");
    return out;
  }();
  return loaded;
}

bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = uint8_t(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((uint8_t(s[i + k]) & 0xc0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& all = tokenizers();
  if (all.empty() || size == 0) return 0;
  const pagoda::Tokenizer& tok = *all[data[0] % all.size()];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  for (bool parse_special : {false, true}) {
    for (int32_t id : tok.encode(text, true, parse_special)) {
      if (id < 0 || id >= tok.vocab_size()) std::abort();
    }
  }

  std::vector<int32_t> ids;
  for (size_t i = 1; i + 4 <= size; i += 4) {
    uint32_t raw;
    std::memcpy(&raw, data + i, 4);
    ids.push_back(int32_t(raw % uint32_t(tok.vocab_size())));
  }
  const std::string whole = tok.decode(ids);
  pagoda::StreamDecoder stream(tok);
  std::string streamed;
  for (int32_t id : ids) {
    const std::string piece = stream.feed(id);
    if (!valid_utf8(piece)) std::abort();
    streamed += piece;
  }
  streamed += stream.flush();
  if (streamed != whole || !valid_utf8(whole)) std::abort();
  return 0;
}
