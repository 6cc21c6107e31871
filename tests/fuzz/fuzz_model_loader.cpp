// The model loader on arbitrary GGUF bytes: hyperparameters, tensor shapes and types, the
// tokenizer inside. A file it accepts must also tokenize and detokenize without faults.

#include "engine/model/model.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pagoda::fuzz::MemoryFile file(data, size);
  pagoda::fuzz::expect_clean([&] {
    const pagoda::Model model = pagoda::load_gguf_model(file.path());
    const std::vector<int32_t> ids = model.tokenizer.encode("Once upon a time, 12 ünïcödé", true);
    (void)model.tokenizer.decode(ids);
  });
  return 0;
}
