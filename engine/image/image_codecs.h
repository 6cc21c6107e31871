#pragma once
// The decoders behind decode_image (engine/image/image_decode.h), one file per format, and the
// size check they share. Each takes the whole file and returns 8-bit RGB or throws pagoda::Error.

#include <cstdint>
#include <span>

#include "engine/image/image.h"
#include "engine/image/image_decode.h"

namespace pagoda::image_codecs {

RgbImage decode_png(std::span<const uint8_t> bytes, const ImageLimits& limits);   // image_png.cpp
RgbImage decode_jpeg(std::span<const uint8_t> bytes, const ImageLimits& limits);  // image_jpeg.cpp
RgbImage decode_webp(std::span<const uint8_t> bytes, const ImageLimits& limits);  // image_webp.cpp

// Throws pagoda::Error unless a `format` image of width × height is non-empty and within
// `limits`; called with the header's numbers before anything is allocated for the pixels.
void check_dimensions(const char* format, int64_t width, int64_t height, const ImageLimits& limits);

// An RgbImage of width × height, its pixels not yet written; only after check_dimensions.
RgbImage allocate_rgb(int32_t width, int32_t height);

}  // namespace pagoda::image_codecs
