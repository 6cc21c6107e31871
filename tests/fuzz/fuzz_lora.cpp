// The LoRA adapter loader on arbitrary bytes, against a fixed small base shape.

#include "engine/lora/lora_adapter.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pagoda::ModelConfig base;
  base.dim = 64;
  base.n_layers = 2;
  base.n_heads = 4;
  base.n_kv_heads = 2;
  base.ffn_dim = 128;
  base.vocab_size = 256;
  base.context_length = 128;
  pagoda::fuzz::MemoryFile file(data, size);
  pagoda::fuzz::expect_clean([&] { (void)pagoda::load_lora_adapter(file.path(), base, 0.5f); });
  return 0;
}
