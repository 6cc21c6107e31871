// Still WebP (lossy VP8, lossless VP8L, with or without alpha) through libwebp, to the RGB
// Pillow 9.4 gives: its WebP plugin decodes to RGBA with libwebp's defaults (fancy upsampling,
// no dithering) and convert("RGB") drops the alpha. Animated files are refused.

#include <webp/decode.h>

#include <cstring>
#include <string>
#include <vector>

#include "engine/image/image_codecs.h"
#include "pagoda/error.h"

namespace pagoda::image_codecs {
namespace {

[[noreturn]] void fail(VP8StatusCode status) {
  switch (status) {
    case VP8_STATUS_NOT_ENOUGH_DATA: throw Error("WebP image is truncated: the data ends before the image does");
    case VP8_STATUS_UNSUPPORTED_FEATURE: throw Error("WebP image uses a feature libwebp does not decode");
    case VP8_STATUS_OUT_OF_MEMORY: throw Error("WebP image could not be decoded: out of memory");
    default: throw Error("WebP image is corrupt (libwebp status " + std::to_string(int(status)) + ")");
  }
}

}  // namespace

RgbImage decode_webp(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  // An extended file's canvas size (VP8X: 24 bits a side, so up to 16M) checked from the header
  // itself; the simple formats' 14-bit sizes are read by WebPGetFeatures below.
  if (bytes.size() >= 30 && std::memcmp(bytes.data() + 12, "VP8X", 4) == 0) {
    auto u24 = [&](size_t at) {
      return int64_t(bytes[at]) | int64_t(bytes[at + 1]) << 8 | int64_t(bytes[at + 2]) << 16;
    };
    check_dimensions("WebP", u24(24) + 1, u24(27) + 1, limits);
  }
  WebPDecoderConfig config;
  if (!WebPInitDecoderConfig(&config)) throw Error("WebP decoder could not start (library version mismatch)");
  // The headers alone (RIFF, VP8X canvas or the VP8/VP8L frame header): nothing is decoded yet.
  VP8StatusCode status = WebPGetFeatures(bytes.data(), bytes.size(), &config.input);
  if (status != VP8_STATUS_OK) fail(status);
  if (config.input.has_animation) {
    throw Error("animated WebP is not supported: send a still image (PNG, JPEG or a still WebP)");
  }
  check_dimensions("WebP", config.input.width, config.input.height, limits);

  RgbImage image = allocate_rgb(config.input.width, config.input.height);
  const size_t pixels = size_t(image.width) * size_t(image.height);
  // With alpha, RGBA into a scratch buffer; without, RGB straight into the image. Either way the
  // colour channels are the same bytes (libwebp does not premultiply in MODE_RGBA).
  std::vector<uint8_t> rgba(config.input.has_alpha ? pixels * 4 : 0);
  config.output.colorspace = config.input.has_alpha ? MODE_RGBA : MODE_RGB;
  config.output.is_external_memory = 1;
  config.output.u.RGBA.rgba = config.input.has_alpha ? rgba.data() : image.rgb.data();
  config.output.u.RGBA.stride = image.width * (config.input.has_alpha ? 4 : 3);
  config.output.u.RGBA.size = config.input.has_alpha ? rgba.size() : image.rgb.size();
  status = WebPDecode(bytes.data(), bytes.size(), &config);
  WebPFreeDecBuffer(&config.output);
  if (status != VP8_STATUS_OK) fail(status);
  for (size_t i = 0; i < rgba.size() / 4; ++i) {
    for (int c = 0; c < 3; ++c) image.rgb[3 * i + c] = rgba[4 * i + c];
  }
  return image;
}

}  // namespace pagoda::image_codecs
