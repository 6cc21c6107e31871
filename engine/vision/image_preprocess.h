#pragma once
// An image made ready for a projector file's vision encoder, as that model family's Python
// preprocessor makes it (resize filter, padding, mean/std), and how many image tokens it becomes.
//
// - LLaVA (LlavaMlp): LLaVA 1.5's pad-to-square with (122, 116, 104), the image at the top-left
//   as llama.cpp's clip_image_preprocess places it (LLaVA's own expand2square centers it), then
//   CLIPImageProcessor's Pillow BICUBIC resize to image_size² and its normalization.
// - Gemma 3: Gemma3ImageProcessor (SigLIP's): Pillow BILINEAR straight to image_size², no aspect
//   preservation, no pan-and-scan; tokens_per_image tokens after the projector's pooling.
// - Qwen2-VL / Qwen2.5-VL: Qwen2VLImageProcessor: smart_resize to multiples of
//   patch_size · spatial_merge within [min_pixels, max_pixels], Pillow BICUBIC, normalization.
// Each normalizes as HF does: (v / 255 - mean) / std in float, mean and std from the file.

#include <cstdint>

#include "engine/image/image.h"
#include "engine/vision/vision_model.h"

namespace pagoda {

struct PreprocessedImage {
  PixelPlanes pixels;      // the encoder's input
  int32_t token_rows = 0;  // image tokens down the image, after merging (Qwen) or pooling (Gemma 3)
  int32_t token_cols = 0;  // image tokens across
  int32_t tokens() const { return token_rows * token_cols; }
};

// Preprocesses `image` for `config`'s family. Throws pagoda::Error when the config cannot take
// images (no image or patch size, Gemma 3's tokens_per_image not a square) or when Qwen's
// processor would refuse the image (an aspect ratio over 200).
PreprocessedImage preprocess_image(const RgbImage& image, const VisionConfig& config);

// Qwen2-VL's smart_resize (transformers' image_processing_qwen2_vl.py), in the same double
// arithmetic: each side rounded (half to even, as Python's round) to a multiple of `factor`,
// then scaled down (floor) when the area is over max_pixels or up (ceil) when under min_pixels;
// at least `factor` a side. Throws pagoda::Error when the aspect ratio is over 200, as it does.
struct ImageExtent {
  int32_t height = 0;
  int32_t width = 0;
};
ImageExtent qwen_smart_resize(int32_t height, int32_t width, int32_t factor, int64_t min_pixels, int64_t max_pixels);

// Qwen2-VL's published bounds, used when the projector file gives none (0): 56·56 and 28·28·1280.
inline constexpr int64_t kQwenDefaultMinPixels = 56 * 56;
inline constexpr int64_t kQwenDefaultMaxPixels = 28 * 28 * 1280;

}  // namespace pagoda
