#pragma once
// Image files in requests → 8-bit RGB pixels, as Pillow's `Image.open(f).convert("RGB")` gives them
// (Debian's python3-pil 9.4, the reference the Python preprocessors run on), so an image reaches
// the encoder with the pixels the model's own processor would have seen.
//
// PNG (libpng), JPEG (libjpeg-turbo) and still WebP (libwebp), told apart by their magic bytes.
// Whatever the bytes, decoding never crashes and never trusts a header's size: every problem is a
// pagoda::Error whose message names it plainly (for a server's 400), and dimensions over the
// limits are refused from the header alone, before any pixel buffer is allocated.
//
// Conversions, following Pillow 9.4:
// - alpha is dropped, not composited (RGBA, gray+alpha, tRNS of any kind);
// - 16-bit samples keep their high byte, except 16-bit grayscale without alpha, which Pillow opens
//   as 32-bit "I" and clips to 0..255 on its way to RGB (so most such images come out white: the
//   Python processors see that too);
// - palette indices past the PLTE's entries read Pillow's default palette, a gray ramp (i, i, i);
// - JPEG: libjpeg-turbo's defaults (ISLOW DCT, fancy upsampling), as Pillow decodes; CMYK and YCCK
//   are read as Adobe's inverted CMYK (Pillow assumes it for every 4-channel JPEG) and converted as
//   Pillow's cmyk2rgb does;
// - no EXIF orientation, ICC profile or gamma is applied (neither HF processors nor llama.cpp do).
// Animated WebP is refused with an error saying so (no frame is chosen for the caller).

#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/image/image.h"

namespace pagoda {

// The largest image decode_image accepts. Both bounds are checked against the file's header.
struct ImageLimits {
  int32_t max_side = 16384;                // pixels along either side
  int64_t max_pixels = int64_t(64) << 20;  // width · height: 64 Mi pixels (8192 × 8192)
};

// Decodes a PNG, JPEG or WebP file held in memory to 8-bit RGB. Throws pagoda::Error on empty
// input, an unknown or unsupported type (naming what the bytes look like: GIF, BMP, TIFF, SVG,
// base64 text, ...), truncated or corrupt data, zero width or height, and dimensions over `limits`.
RgbImage decode_image(std::span<const std::byte> bytes, const ImageLimits& limits = {});

}  // namespace pagoda
