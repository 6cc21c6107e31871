// The three families' preprocessing pipelines (see image_preprocess.h for the references).

#include "engine/vision/image_preprocess.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/image/image_resize.h"
#include "pagoda/error.h"

namespace pagoda {
namespace {

std::string size_text(int64_t width, int64_t height) { return std::to_string(width) + "x" + std::to_string(height); }

// Throws unless a fixed-size encoder's square input holds at least one patch.
void require_square_input(const VisionConfig& config) {
  if (config.image_size < 1 || config.patch_size < 1 || config.image_size < config.patch_size) {
    throw Error("the vision encoder's image size (" + std::to_string(config.image_size) + ") and patch size (" +
                std::to_string(config.patch_size) + ") cannot take an image");
  }
}

// LLaVA 1.5: pad to a square of the CLIP mean colour (LLaVA's expand2square, its background
// tuple(int(m · 255) for m in image_mean)), the image at the top-left as llama.cpp puts it rather
// than centered as LLaVA's Python does; then CLIPImageProcessor's BICUBIC resize (the square's
// shortest edge to image_size, so the whole square; the center crop then takes all of it).
PreprocessedImage preprocess_llava(const RgbImage& image, const VisionConfig& config) {
  require_square_input(config);
  const int32_t grid = config.patches_per_side();
  const int32_t side = std::max(image.width, image.height);
  const RgbImage square = resize_on_canvas(image, side, side, {122, 116, 104}, config.image_size, config.image_size,
                                           ResampleFilter::Bicubic);
  return {normalize(square, config.image_mean, config.image_std), grid, grid};
}

// Gemma 3: Gemma3ImageProcessor resizes straight to image_size² with BILINEAR (do_pan_and_scan
// off, its default); the projector pools the patch grid to tokens_per_image tokens, a square.
PreprocessedImage preprocess_gemma3(const RgbImage& image, const VisionConfig& config) {
  require_square_input(config);
  const auto grid = int32_t(std::lround(std::sqrt(double(std::max(config.tokens_per_image, 0)))));
  if (grid < 1 || grid * grid != config.tokens_per_image) {
    throw Error("Gemma 3's tokens per image (" + std::to_string(config.tokens_per_image) + ") is not a square");
  }
  const RgbImage resized = resize(image, config.image_size, config.image_size, ResampleFilter::Bilinear);
  return {normalize(resized, config.image_mean, config.image_std), grid, grid};
}

// Qwen2-VL and Qwen2.5-VL: Qwen2VLImageProcessor's smart_resize, BICUBIC; one token per
// spatial_merge × spatial_merge block of patches.
PreprocessedImage preprocess_qwen(const RgbImage& image, const VisionConfig& config) {
  if (config.patch_size < 1 || config.spatial_merge < 1) {
    throw Error("Qwen2-VL's patch size (" + std::to_string(config.patch_size) + ") and spatial merge (" +
                std::to_string(config.spatial_merge) + ") cannot take an image");
  }
  const int32_t factor = config.patch_size * config.spatial_merge;
  const int64_t min_pixels = config.min_pixels > 0 ? config.min_pixels : kQwenDefaultMinPixels;
  const int64_t max_pixels = config.max_pixels > 0 ? config.max_pixels : kQwenDefaultMaxPixels;
  if (min_pixels > max_pixels) {
    throw Error("Qwen2-VL's image_min_pixels (" + std::to_string(min_pixels) + ") is over its image_max_pixels (" +
                std::to_string(max_pixels) + ")");
  }
  const ImageExtent extent = qwen_smart_resize(image.height, image.width, factor, min_pixels, max_pixels);
  const RgbImage resized = resize(image, extent.width, extent.height, ResampleFilter::Bicubic);
  return {normalize(resized, config.image_mean, config.image_std), extent.height / factor, extent.width / factor};
}

}  // namespace

ImageExtent qwen_smart_resize(int32_t height, int32_t width, int32_t factor, int64_t min_pixels, int64_t max_pixels) {
  if (height < 1 || width < 1 || factor < 1 || min_pixels < 1 || max_pixels < 1) {
    throw Error("cannot fit a " + size_text(width, height) + " image to multiples of " + std::to_string(factor) +
                " within " + std::to_string(min_pixels) + " to " + std::to_string(max_pixels) + " pixels");
  }
  const double ratio = double(std::max(height, width)) / double(std::min(height, width));
  if (ratio > 200) {
    throw Error("the image is " + size_text(width, height) +
                " pixels: its aspect ratio is over 200:1, which Qwen2-VL's preprocessing refuses");
  }
  const double f = factor;
  const double area = double(int64_t(height) * width);
  // std::nearbyint rounds half to even in the default rounding mode, as Python's round().
  double h_bar = std::nearbyint(height / f) * f;
  double w_bar = std::nearbyint(width / f) * f;
  if (h_bar * w_bar > double(max_pixels)) {
    const double beta = std::sqrt(area / double(max_pixels));
    h_bar = std::max(f, std::floor(height / beta / f) * f);
    w_bar = std::max(f, std::floor(width / beta / f) * f);
  } else if (h_bar * w_bar < double(min_pixels)) {
    const double beta = std::sqrt(double(min_pixels) / area);
    h_bar = std::ceil(height * beta / f) * f;
    w_bar = std::ceil(width * beta / f) * f;
  }
  if (h_bar > 1 << 20 || w_bar > 1 << 20) {
    throw Error("Qwen2-VL's preprocessing would resize a " + size_text(width, height) + " image to " +
                size_text(int64_t(w_bar), int64_t(h_bar)) + ": check image_min_pixels");
  }
  return {int32_t(h_bar), int32_t(w_bar)};
}

PreprocessedImage preprocess_image(const RgbImage& image, const VisionConfig& config) {
  if (image.width < 1 || image.height < 1) throw Error("cannot preprocess an empty image");
  switch (config.projector) {
    case ProjectorType::LlavaMlp: return preprocess_llava(image, config);
    case ProjectorType::Gemma3: return preprocess_gemma3(image, config);
    case ProjectorType::Qwen2VL:
    case ProjectorType::Qwen25VL: return preprocess_qwen(image, config);
  }
  throw Error("no image preprocessing for projector type " + std::to_string(int(config.projector)));
}

}  // namespace pagoda
