#pragma once
// Resizing and normalizing 8-bit RGB as the Python preprocessors do: Pillow's Image.resize (HF
// image processors resize through Pillow), reproduced bit for bit, and HF's rescale-then-normalize.
//
// The resize follows Pillow 9.4's libImaging/Resample.c: a separable convolution whose support
// widens by the downscale factor, coefficients normalized per output pixel and rounded to 22-bit
// fixed point, a horizontal pass over just the rows the vertical pass reads, each pass rounding
// and clipping to 8 bits. NEAREST follows Pillow's affine scale (Geometry.c).

#include <array>
#include <cstdint>

#include "engine/image/image.h"

namespace pagoda {

// Pillow's resampling filters of the same names.
enum class ResampleFilter {
  Nearest,   // Image.NEAREST
  Bilinear,  // Image.BILINEAR: triangle, support 1
  Bicubic,   // Image.BICUBIC: cubic convolution with a = -0.5, support 2
  Lanczos,   // Image.LANCZOS: windowed sinc, support 3
};

// `image` resized to width × height as Pillow's `image.resize((width, height), resample=filter)`
// does. Throws pagoda::Error when either size is not positive. Same size: a copy, as Pillow.
RgbImage resize(const RgbImage& image, int32_t width, int32_t height, ResampleFilter filter);

// `image` placed at the top-left of a canvas_width × canvas_height canvas filled with `background`,
// then resized as resize() resizes that canvas, without making the canvas (a 16384×1 image padded
// to a square would take 800 MB): LLaVA's pad-to-square. The canvas must hold the image.
RgbImage resize_on_canvas(const RgbImage& image, int32_t canvas_width, int32_t canvas_height,
                          const std::array<uint8_t, 3>& background, int32_t width, int32_t height,
                          ResampleFilter filter);

// HF's rescale then normalize, in float: value[c] = (v / 255 - mean[c]) / std_dev[c], channel planes
// in PixelPlanes' layout. The rescale is computed as HF does it (v · (1/255) in double, then
// rounded to float), so the planes match a float32 numpy pipeline to the last bit or so.
PixelPlanes normalize(const RgbImage& image, const std::array<float, 3>& mean, const std::array<float, 3>& std_dev);

}  // namespace pagoda
