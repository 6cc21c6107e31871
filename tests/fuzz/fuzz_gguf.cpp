// The GGUF parser on arbitrary bytes: open must either validate the file or throw
// pagoda::Error; whatever it accepts must then be readable without going out of bounds.

#include "engine/gguf/gguf.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pagoda::fuzz::MemoryFile file(data, size);
  pagoda::fuzz::expect_clean([&] {
    const pagoda::GgufFile gguf = pagoda::GgufFile::open(file.path());
    for (const std::string& key : gguf.keys()) {
      pagoda::fuzz::expect_clean([&] { (void)gguf.get_uint(key); });
      pagoda::fuzz::expect_clean([&] { (void)gguf.get_float(key); });
      pagoda::fuzz::expect_clean([&] { (void)gguf.get_string(key); });
      pagoda::fuzz::expect_clean([&] { (void)gguf.get_string_array(key); });
      pagoda::fuzz::expect_clean([&] { (void)gguf.get_float_array(key); });
      pagoda::fuzz::expect_clean([&] { (void)gguf.get_int32_array(key); });
    }
    for (const pagoda::GgufTensorInfo& t : gguf.tensors()) {
      // Dequantizing touches every byte of the tensor; bound the work per input.
      if (t.n_elements <= (1u << 16)) pagoda::fuzz::expect_clean([&] { (void)gguf.read_f32(t); });
    }
  });
  return 0;
}
