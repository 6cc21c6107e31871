// decode_image: tells the format from the magic bytes and hands the file to its decoder; names
// what the bytes look like when they are not a PNG, JPEG or WebP.

#include "engine/image/image_decode.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "engine/image/image_codecs.h"
#include "pagoda/error.h"

namespace pagoda {
namespace image_codecs {

void check_dimensions(const char* format, int64_t width, int64_t height, const ImageLimits& limits) {
  const std::string size = std::to_string(width) + "x" + std::to_string(height);
  if (width <= 0 || height <= 0) {
    throw Error(std::string(format) + " image has zero width or height (" + size + ")");
  }
  if (width > limits.max_side || height > limits.max_side) {
    throw Error(std::string(format) + " image is " + size + " pixels: over the limit of " +
                std::to_string(limits.max_side) + " pixels a side");
  }
  if (width * height > limits.max_pixels) {
    throw Error(std::string(format) + " image is " + size + " pixels (" + std::to_string(width * height) +
                "): over the limit of " + std::to_string(limits.max_pixels) + " pixels in all");
  }
}

RgbImage allocate_rgb(int32_t width, int32_t height) {
  RgbImage image;
  image.width = width;
  image.height = height;
  image.rgb.resize(size_t(width) * size_t(height) * 3);
  return image;
}

}  // namespace image_codecs

namespace {

using namespace std::string_view_literals;

enum class Format { Png, Jpeg, WebP, Other };

bool starts_with(std::string_view bytes, std::string_view prefix) { return bytes.substr(0, prefix.size()) == prefix; }

Format format_of(std::string_view b) {
  if (starts_with(b, "\x89PNG\r\n\x1a\n"sv)) return Format::Png;
  if (starts_with(b, "\xff\xd8\xff")) return Format::Jpeg;
  if (b.size() >= 12 && starts_with(b, "RIFF") && b.substr(8, 4) == "WEBP") return Format::WebP;
  return Format::Other;
}

// What bytes that are none of the three formats look like, for the error message: a format's
// name, a hint about text, or "" when nothing is recognised.
std::string likely_type(std::string_view b) {
  struct Magic {
    std::string_view prefix;
    const char* name;
  };
  static constexpr Magic kMagic[] = {
      {"GIF87a"sv, "GIF"},
      {"GIF89a"sv, "GIF"},
      {"BM"sv, "BMP"},
      {"II*\0"sv, "TIFF"},
      {"MM\0*"sv, "TIFF"},
      {"\0\0\1\0"sv, "ICO"},
      {"8BPS"sv, "PSD (Photoshop)"},
      {"%PDF"sv, "PDF"},
      {"\0\0\0\x0cjP  \r\n\x87\n"sv, "JPEG 2000"},
      {"\xff\x4f\xff\x51"sv, "JPEG 2000"},
      {"\xff\x0a"sv, "JPEG XL"},
      {"\0\0\0\x0cJXL \r\n\x87\n"sv, "JPEG XL"},
      {"qoif"sv, "QOI"},
      {"v/1\x01"sv, "OpenEXR"},
      {"RIFF"sv, "RIFF (not WebP)"},
      // A data: URL or base64 that was never decoded: the caller's mistake, worth saying so.
      {"data:"sv, "a data: URL (send the decoded bytes)"},
      {"iVBORw0KGgo"sv, "base64 text of a PNG (decode it first)"},
      {"/9j/"sv, "base64 text of a JPEG (decode it first)"},
      {"UklGR"sv, "base64 text of a WebP (decode it first)"},
      {"R0lGOD"sv, "base64 text of a GIF"},
  };
  for (const Magic& m : kMagic) {
    if (starts_with(b, m.prefix)) return m.name;
  }
  if (b.size() >= 12 && b.substr(4, 4) == "ftyp") {
    const std::string_view brand = b.substr(8, 4);
    if (brand == "avif" || brand == "avis") return "AVIF";
    if (brand == "heic" || brand == "heix" || brand == "mif1" || brand == "msf1" || brand == "hevc") return "HEIC";
    return "an ISO media file (MP4/MOV/HEIF)";
  }
  // Text: markup (SVG, HTML) or anything else printable.
  const std::string_view head = b.substr(0, 512);
  const bool text = std::all_of(head.begin(), head.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u >= 0x20 || c == '\n' || c == '\r' || c == '\t';
  });
  if (text) {
    if (head.find("<svg") != std::string_view::npos) return "SVG (vector images are not decoded)";
    if (head.find("<html") != std::string_view::npos || head.find("<!DOCTYPE") != std::string_view::npos)
      return "HTML (not an image)";
    return "text (not an image)";
  }
  return "";
}

}  // namespace

RgbImage decode_image(std::span<const std::byte> bytes, const ImageLimits& limits) {
  if (bytes.empty()) throw Error("the image is empty (0 bytes)");
  const std::span<const uint8_t> data(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  const std::string_view b(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  switch (format_of(b)) {
    case Format::Png: return image_codecs::decode_png(data, limits);
    case Format::Jpeg: return image_codecs::decode_jpeg(data, limits);
    case Format::WebP: return image_codecs::decode_webp(data, limits);
    case Format::Other: break;
  }
  const std::string type = likely_type(b);
  if (!type.empty()) throw Error("unsupported image type " + type + ": send PNG, JPEG or WebP");
  std::string start;
  for (size_t i = 0; i < std::min<size_t>(b.size(), 8); ++i) {
    char hex[4];
    std::snprintf(hex, sizeof hex, "%s%02x", i ? " " : "", unsigned(static_cast<unsigned char>(b[i])));
    start += hex;
  }
  throw Error("unknown image type (the bytes start " + start + "): send PNG, JPEG or WebP");
}

}  // namespace pagoda
