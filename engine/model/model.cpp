#include "engine/model/model.h"

#include <cstring>

#include "engine/gguf/mapped_file.h"

namespace pagoda {

Model load_model(const std::string& path, const std::string& tokenizer_path, MappedFile::Load load) {
  const bool is_gguf = [&] {
    MappedFile file = MappedFile::open(path);
    auto bytes = file.bytes();
    return bytes.size() >= 4 && std::memcmp(bytes.data(), "GGUF", 4) == 0;
  }();
  return is_gguf ? load_gguf_model(path, load) : load_llama2c_model(path, tokenizer_path, load);
}

std::optional<std::string> weights_lost(const Model& model) {
  if (!model.file || !model.file->lost()) return std::nullopt;
  return "model file " + model.path +
         " changed after it was mapped (truncated?): its weights are lost; reload the model";
}

}  // namespace pagoda
