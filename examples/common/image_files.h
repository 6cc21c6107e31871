#pragma once
// Images the programs attach from files (pagoda-chat's --image and /image, pagoda-loadgen's
// --image): read whole, and measured as Engine::submit will lay them out, so that a program that
// keeps its prompts within the context, or sizes the KV cache for them, counts the positions an
// image takes (its encoder rows and its family's image tokens around them) before submitting it.
// Measuring decodes the image, so a file that is not an image this projector reads is an error
// when it is attached, not later in the middle of a conversation or a benchmark.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>

#include "engine/image/image_decode.h"
#include "engine/image_prompt.h"
#include "engine/model/model.h"
#include "engine/vision/image_preprocess.h"
#include "engine/vision/vision_model.h"
#include "pagoda/error.h"

namespace pagoda::cli {

// The bytes of the file at `path`; pagoda::Error naming it when it cannot be read.
inline std::string read_image_file(const std::string& path) {
  if (std::filesystem::is_directory(path)) throw Error(path + ": is a directory, not an image file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open");
  std::string data(std::istreambuf_iterator<char>(in), {});
  if (in.bad()) throw Error(path + ": cannot read");
  return data;
}

// How many prompt positions an image takes with a vision projector.
class ImageSizer {
 public:
  // `mmproj`: the projector file (EngineConfig::mmproj_path); `model` and `tokenizer`: the
  // language model (EngineConfig::model_path, tokenizer_path), whose vocabulary holds the
  // family's image tokens. Both files are mapped only while this is built.
  ImageSizer(const std::string& mmproj, const std::string& model, const std::string& tokenizer = "") {
    config_ = load_projector(mmproj).config;
    const ImageTokens around = image_tokens(config_, load_model(model, tokenizer).tokenizer);
    around_ = int32_t(around.begin.size() + around.end.size());
  }

  // The positions `image` (an image file's bytes) takes; pagoda::Error starting with `name` and
  // giving the decoder's words when it does not decode, or its family's processor refuses it.
  int32_t positions(const std::string& image, const std::string& name) const {
    try {
      const RgbImage rgb = decode_image(std::as_bytes(std::span(image.data(), image.size())));
      return around_ + preprocess_image(rgb, config_).tokens();
    } catch (const Error& e) {
      throw Error(name + ": " + e.what());
    }
  }

 private:
  VisionConfig config_;
  int32_t around_ = 0;  // the family's image tokens before and after the rows
};

}  // namespace pagoda::cli
