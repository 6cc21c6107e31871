#pragma once
// Tiny vision test inputs for the engine's image tests: a LLaVA-style model and projector pair,
// and PNG files to send it.

#include <cstdint>
#include <string>

namespace pagoda::test {

// A PNG of random-ish RGB pixels (smooth, so resizing has something to average), from `seed`.
std::string png_file(int32_t width, int32_t height, uint32_t seed);

// A tiny LLaVA-style pair: a random Llama of width 96 and a random CLIP projector into it
// (16 rows an image), written once per program.
struct VisionFiles {
  std::string model, mmproj;
};
const VisionFiles& llava_files();

// Another random CLIP projector for llava_files().model (`seed` picks its weights), written to
// the scratch folder as `name`.
std::string llava_projector(const std::string& name, uint64_t seed);

}  // namespace pagoda::test
