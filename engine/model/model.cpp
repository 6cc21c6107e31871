#include "engine/model/model.h"

#include <cstring>

#include "engine/gguf/mapped_file.h"

namespace pagoda {

Model load_model(const std::string& path, const std::string& tokenizer_path) {
  const bool is_gguf = [&] {
    MappedFile file = MappedFile::open(path);
    auto bytes = file.bytes();
    return bytes.size() >= 4 && std::memcmp(bytes.data(), "GGUF", 4) == 0;
  }();
  return is_gguf ? load_gguf_model(path) : load_llama2c_model(path, tokenizer_path);
}

}  // namespace pagoda
