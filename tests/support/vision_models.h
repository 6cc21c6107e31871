#pragma once
// Test files for requests with images: a tiny LLaVA-style pair (a language model and a vision
// projector into it) and PNG images, for the engine's, the chat CLI's and pagoda-loadgen's tests.

#include <cstdint>
#include <string>

namespace pagoda::test {

struct VisionFiles {
  std::string model, mmproj;
};

// A random Llama 96 wide (tiny_gqa's shape otherwise: context 256) and a random CLIP projector
// into it (LLaVA's MLP, the "tiny" preset: a 56-pixel image becomes 16 rows); written once per
// test program and reused.
const VisionFiles& llava_files();

// A tiny Gemma 3 pair: a random Gemma 3 of width 96 (sliding window 8) whose vocabulary holds
// Gemma's image tokens, and a random SigLIP projector into it giving 16 rows an image, which
// attend to each other both ways.
const VisionFiles& gemma3_files();

// Another random CLIP projector for llava_files().model (`seed` picks its weights), written to
// the scratch folder as `name`.
std::string llava_projector(const std::string& name, uint64_t seed);

// A PNG of smooth (so resizing has something to average) RGB pixels drawn from `seed`.
std::string png_file(int32_t width, int32_t height, uint32_t seed);

// png_file's bytes written to the scratch folder as `name`; its path.
std::string png_path(const std::string& name, int32_t width, int32_t height, uint32_t seed);

}  // namespace pagoda::test
