#pragma once
// The --lora NAME=PATH[:SCALE] flag of the example programs.

#include <string>

#include "examples/common/args.h"

namespace pagoda::cli {

struct LoraFlag {
  std::string name, path;
  float scale = 1.0f;
};

// NAME=PATH[:SCALE]; the scale multiplies the adapter's alpha / rank, as llama.cpp's
// --lora-scaled does.
inline LoraFlag parse_lora(const std::string& text) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    throw Error("--lora needs NAME=PATH[:SCALE], got '" + text + "'");
  }
  LoraFlag flag{text.substr(0, eq), text.substr(eq + 1)};
  if (const size_t colon = flag.path.rfind(':'); colon != std::string::npos) {
    flag.scale = Args::parse<float>("--lora scale", flag.path.substr(colon + 1));
    flag.path.resize(colon);
  }
  return flag;
}

}  // namespace pagoda::cli
