// The llama2.c loaders on arbitrary bytes: the first input byte picks the checkpoint loader
// (with stories260K's real tokenizer.bin) or the tokenizer.bin loader; the rest is the file.

#include "engine/model/model.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const std::string tokenizer = pagoda::fuzz::shared_file("models/stories260K/tok512.bin");
  pagoda::fuzz::MemoryFile file(data + 1, size - 1);
  if (data[0] & 1) {
    pagoda::fuzz::expect_clean([&] {
      const pagoda::Tokenizer t = pagoda::Tokenizer::from_llama2c(file.path(), 512);
      (void)t.decode(t.encode("Once upon a time", true));
    });
  } else if (!tokenizer.empty()) {
    pagoda::fuzz::expect_clean([&] { (void)pagoda::load_llama2c_model(file.path(), tokenizer); });
  }
  return 0;
}
