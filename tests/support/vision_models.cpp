#include "support/vision_models.h"

#include <png.h>

#include <fstream>
#include <random>
#include <vector>

#include "pagoda/error.h"
#include "support/test_support.h"
#include "testing/synth.h"
#include "testing/vision_synth.h"

namespace pagoda::test {

namespace {

ModelConfig llava_model_config() {
  ModelConfig c = tiny_gqa_config();
  c.dim = 96, c.n_heads = 8, c.n_kv_heads = 2;
  return c;
}

}  // namespace

std::string png_file(int32_t width, int32_t height, uint32_t seed) {
  std::mt19937 rng(seed);
  const int r0 = int(rng() % 200), g0 = int(rng() % 200), b0 = int(rng() % 200);
  std::vector<uint8_t> rgb(size_t(width) * height * 3);
  for (int32_t y = 0; y < height; ++y) {
    for (int32_t x = 0; x < width; ++x) {
      uint8_t* p = rgb.data() + (size_t(y) * width + x) * 3;
      p[0] = uint8_t((r0 + 3 * x) % 256), p[1] = uint8_t((g0 + 5 * y) % 256), p[2] = uint8_t((b0 + x * y) % 256);
    }
  }
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = png_uint_32(width);
  image.height = png_uint_32(height);
  image.format = PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&image, nullptr, &size, 0, rgb.data(), 0, nullptr)) throw Error("png: sizing failed");
  std::string out(size, '\0');
  if (!png_image_write_to_memory(&image, out.data(), &size, 0, rgb.data(), 0, nullptr))
    throw Error("png: write failed");
  out.resize(size);
  return out;
}

std::string png_path(const std::string& name, int32_t width, int32_t height, uint32_t seed) {
  const std::string path = scratch_path(name);
  std::ofstream(path, std::ios::binary) << png_file(width, height, seed);
  return path;
}

const VisionFiles& llava_files() {
  static const VisionFiles files{synth_model_once("llava-lm.gguf", llava_model_config(), 5),
                                 llava_projector("llava-mmproj.gguf", 9)};
  return files;
}

const VisionFiles& gemma3_files() {
  static const VisionFiles files = [] {
    ModelConfig c = tiny_gqa_config();
    c.arch = Architecture::Gemma3;
    c.dim = 96, c.n_heads = 8, c.n_kv_heads = 2, c.n_layers = 6, c.key_length = 32;
    c.sliding_window = 8, c.rope_theta = 1e6f;  // layers 0–4 sliding
    VisionFiles f{scratch_path("gemma3-lm.gguf"), scratch_path("gemma3-mmproj.gguf")};
    SynthSpec lm{c, 5};
    lm.control_tokens = {"<start_of_image>", "<end_of_image>", "<image_soft_token>"};
    write_synth_model(f.model, lm);
    VisionSynthSpec spec;
    spec.config = find_vision_synth_preset(ProjectorType::Gemma3, "tiny").config;
    spec.config.projection_dim = c.dim;
    spec.config.tokens_per_image = 16;
    spec.seed = 9;
    write_synth_projector(f.mmproj, spec);
    return f;
  }();
  return files;
}

std::string llava_projector(const std::string& name, uint64_t seed) {
  const std::string path = scratch_path(name);
  VisionSynthSpec spec;
  spec.config = find_vision_synth_preset(ProjectorType::LlavaMlp, "tiny").config;
  spec.config.projection_dim = llava_model_config().dim;
  spec.seed = seed;
  write_synth_projector(path, spec);
  return path;
}

}  // namespace pagoda::test
