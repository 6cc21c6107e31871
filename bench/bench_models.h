#pragma once
// The benchmarks' models: the brief's shapes written once into the build folder by the synth
// writer, and the real stories260K from ../shared.

#include <filesystem>
#include <string>

#include "testing/synth.h"

namespace pagoda::bench {

inline std::string model_path(const std::string& name) {
  if (name == "stories260K") return std::string(PAGODA_SHARED_DIR) + "/models/stories260K/stories260K.gguf";
  const std::filesystem::path path = std::filesystem::path(PAGODA_BINARY_DIR) / "models" / (name + ".gguf");
  if (!std::filesystem::exists(path)) {
    std::filesystem::create_directories(path.parent_path());
    write_synth_model(path.string(), SynthSpec{synth_preset(name), 1});
  }
  return path.string();
}

}  // namespace pagoda::bench
