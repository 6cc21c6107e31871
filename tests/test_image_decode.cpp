// Image decoding: every format and pixel layout decodes to the RGB Pillow gives
// (tests/image/pil_reference.py writes the files and Pillow's decodes); bad bytes of every kind
// (truncated at every cut, flipped, zero-sized, declaring 20000x20000, of another type) are
// errors that say what is wrong, and a huge header is refused before anything big is allocated.

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/image/image_decode.h"
#include "pagoda/error.h"
#include "support/pil_oracle.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

namespace fs = std::filesystem;

RgbImage decode(const std::string& bytes, const ImageLimits& limits = {}) {
  return decode_image(std::as_bytes(std::span(bytes.data(), bytes.size())), limits);
}

// The error decoding `bytes` gives, or "" when it decodes.
std::string error_of(const std::string& bytes, const ImageLimits& limits = {}) {
  try {
    decode(bytes, limits);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Pillow's suite, written once per test program; "" when Pillow is missing.
const std::string& pil_suite() {
  static const std::string dir = [] {
    if (!test::pil_missing().empty()) return std::string();
    const std::string path = test::scratch_path("pil-suite");
    test::run_pil_script("pil_reference.py", "suite " + path);
    return path;
  }();
  return dir;
}

#define PIL_OR_SKIP()                                            \
  if (const std::string why = test::pil_missing(); !why.empty()) \
  GTEST_SKIP() << why << ": the decodes are not compared with Pillow's"

// The committed fuzz seeds: small PNG, JPEG and WebP files of several layouts (no Python needed).
std::vector<std::pair<std::string, std::string>> seed_files() {
  std::vector<std::pair<std::string, std::string>> seeds;
  for (const auto& entry :
       fs::directory_iterator(std::string(PAGODA_SOURCE_DIR) + "/tests/fuzz/corpus/fuzz_image_decode")) {
    seeds.emplace_back(entry.path().filename().string(), test::read_file(entry.path().string()));
  }
  std::sort(seeds.begin(), seeds.end());
  return seeds;
}

void put_be32(std::string& s, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) s += char(v >> shift);
}
void put_le(std::string& s, uint32_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s += char(v >> (8 * i));
}

uint32_t crc32(const std::string& bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (const char c : bytes) {
    crc ^= uint8_t(c);
    for (int k = 0; k < 8; ++k) crc = crc & 1 ? (crc >> 1) ^ 0xEDB88320u : crc >> 1;
  }
  return ~crc;
}

// A PNG signature and an IHDR chunk (8-bit RGB) with a valid CRC, then IEND: no pixel data.
std::string png_header(uint32_t width, uint32_t height) {
  std::string ihdr = "IHDR";
  put_be32(ihdr, width);
  put_be32(ihdr, height);
  ihdr += std::string("\x08\x02\x00\x00\x00", 5);
  std::string png = "\x89PNG\r\n\x1a\n";
  put_be32(png, 13);
  png += ihdr;
  put_be32(png, crc32(ihdr));
  put_be32(png, 0);
  png += "IEND";
  put_be32(png, crc32("IEND"));
  return png;
}

// SOI and a baseline SOF0 (8-bit, three components), nothing else.
std::string jpeg_header(uint32_t width, uint32_t height) {
  std::string jpeg("\xff\xd8\xff\xc0\x00\x11\x08", 7);
  jpeg += char(height >> 8), jpeg += char(height), jpeg += char(width >> 8), jpeg += char(width);
  jpeg += std::string("\x03\x01\x22\x00\x02\x11\x01\x03\x11\x01", 10);
  return jpeg;
}

// RIFF, WEBP and an extended-format VP8X chunk declaring the canvas, nothing else.
std::string webp_vp8x_header(uint32_t width, uint32_t height) {
  std::string webp = "RIFF";
  put_le(webp, 22, 4);
  webp += "WEBPVP8X";
  put_le(webp, 10, 4);
  put_le(webp, 0, 4);
  put_le(webp, width - 1, 3);
  put_le(webp, height - 1, 3);
  return webp;
}

// RIFF, WEBP and a lossless VP8L header declaring width × height (at most 16384 a side).
std::string webp_vp8l_header(uint32_t width, uint32_t height) {
  std::string webp = "RIFF";
  put_le(webp, 18, 4);
  webp += "WEBPVP8L";
  put_le(webp, 5, 4);
  webp += '\x2f';
  put_le(webp, (width - 1) | (height - 1) << 14, 4);
  webp += '\0';
  return webp;
}

long peak_rss_kb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

TEST(ImageDecode, EveryFormatAndLayoutDecodesAsPillowDoes) {
  PIL_OR_SKIP();
  std::ifstream manifest(pil_suite() + "/manifest.txt");
  std::string line;
  int images = 0, png = 0, jpeg = 0, webp = 0;
  while (std::getline(manifest, line)) {
    std::istringstream fields(line);
    std::string name;
    int32_t width = 0, height = 0;
    fields >> name >> width >> height;
    const std::string path = pil_suite() + "/" + name;
    const RgbImage want = test::read_rgb_file(path + ".rgb", width, height);
    RgbImage got;
    ASSERT_NO_THROW(got = decode(test::read_file(path))) << name;
    const test::ImageDifference d = test::compare_images(got, want);
    EXPECT_EQ(got.width, width) << name;
    EXPECT_EQ(got.height, height) << name;
    EXPECT_EQ(d.pixels_off, 0) << name << ": largest difference " << d.max_step;
    ++images;
    png += name.ends_with(".png"), jpeg += name.ends_with(".jpg"), webp += name.ends_with(".webp");
  }
  std::printf("%d images equal Pillow's decode: %d PNG, %d JPEG, %d WebP\n", images, png, jpeg, webp);
  EXPECT_GT(png, 100);
  EXPECT_GT(jpeg, 30);
  EXPECT_GT(webp, 10);
}

// Pillow cannot write YCCK; libjpeg can (a CMYK picture stored as YCbCr plus K).
std::string ycck_jpeg(int width, int height) {
  jpeg_compress_struct c{};
  jpeg_error_mgr errors{};
  c.err = jpeg_std_error(&errors);
  jpeg_create_compress(&c);
  unsigned char* out = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &out, &size);
  c.image_width = JDIMENSION(width);
  c.image_height = JDIMENSION(height);
  c.input_components = 4;
  c.in_color_space = JCS_CMYK;
  jpeg_set_defaults(&c);
  jpeg_set_colorspace(&c, JCS_YCCK);
  jpeg_set_quality(&c, 90, TRUE);
  jpeg_start_compress(&c, TRUE);
  std::vector<uint8_t> row(size_t(width) * 4);
  while (c.next_scanline < c.image_height) {
    for (size_t i = 0; i < row.size(); ++i) row[i] = uint8_t(i * 37 + c.next_scanline * 11 + (i % 4) * 60);
    JSAMPROW rows[] = {row.data()};
    jpeg_write_scanlines(&c, rows, 1);
  }
  jpeg_finish_compress(&c);
  std::string bytes(reinterpret_cast<const char*>(out), size);
  std::free(out);
  jpeg_destroy_compress(&c);
  return bytes;
}

TEST(ImageDecode, YcckJpegDecodesAsPillowDoes) {
  PIL_OR_SKIP();
  const std::string path = test::scratch_path("ycck.jpg");
  std::ofstream(path, std::ios::binary) << ycck_jpeg(29, 13);
  test::run_pil_script("pil_reference.py", "decode " + path);
  const RgbImage want = test::read_rgb_file(path + ".rgb", 29, 13);
  const test::ImageDifference d = test::compare_images(decode(test::read_file(path)), want);
  EXPECT_EQ(d.pixels_off, 0) << "largest difference " << d.max_step;
}

TEST(ImageDecode, AnimatedWebPIsRefusedSayingSo) {
  PIL_OR_SKIP();
  const std::string error = error_of(test::read_file(pil_suite() + "/animated.webp"));
  EXPECT_NE(error.find("animated WebP is not supported"), std::string::npos) << error;
}

TEST(ImageDecode, TheSeedFilesDecode) {
  const auto seeds = seed_files();
  ASSERT_GE(seeds.size(), 8u);
  for (const auto& [name, bytes] : seeds) {
    const RgbImage image = decode(bytes);
    EXPECT_GT(image.width, 0) << name;
    EXPECT_EQ(image.rgb.size(), size_t(image.width) * size_t(image.height) * 3) << name;
  }
}

TEST(ImageDecode, ATruncatedFileIsAnErrorAtEveryCut) {
  for (const auto& [name, bytes] : seed_files()) {
    // A PNG's last 12 bytes are its IEND chunk, which Pillow does not read either.
    const size_t end = name.ends_with(".png") ? bytes.size() - 12 : bytes.size();
    const char* format = name.ends_with(".png") ? "PNG" : name.ends_with(".jpg") ? "JPEG" : "WebP";
    int truncated = 0;
    for (size_t cut = 0; cut < end; ++cut) {
      const std::string error = error_of(bytes.substr(0, cut));
      ASSERT_FALSE(error.empty()) << name << " cut to " << cut << " bytes decoded";
      if (error.find(std::string(format) + " image is truncated") != std::string::npos) ++truncated;
    }
    // Cuts inside the magic bytes are "unknown type" instead; a WebP cut inside a chunk header
    // may read as corrupt.
    EXPECT_GT(truncated, int(end) * 3 / 4) << name;
  }
}

TEST(ImageDecode, FlippedBytesGiveAnImageOrAnErrorNeverACrash) {
  const ImageLimits limits{2048, 1 << 20};
  int decoded = 0, refused = 0;
  for (const auto& [name, bytes] : seed_files()) {
    for (size_t at = 0; at < bytes.size(); ++at) {
      for (const uint8_t mask : {0x01, 0x80, 0xFF}) {
        std::string flipped = bytes;
        flipped[at] = char(uint8_t(flipped[at]) ^ mask);
        try {
          const RgbImage image = decode(flipped, limits);
          ASSERT_EQ(image.rgb.size(), size_t(image.width) * size_t(image.height) * 3) << name;
          ++decoded;
        } catch (const Error&) {
          ++refused;
        }
      }
    }
  }
  std::printf("flipped bytes: %d decoded, %d refused\n", decoded, refused);
}

TEST(ImageDecode, HeadersDeclaringHugeImagesAreRefusedBeforeDecoding) {
  const long rss_before = peak_rss_kb();
  struct Bomb {
    std::string bytes;
    const char* size;
  };
  const Bomb bombs[] = {
      {png_header(20000, 20000), "20000x20000"},       {png_header(100000, 1), "100000x1"},
      {jpeg_header(20000, 20000), "20000x20000"},      {jpeg_header(65535, 1), "65535x1"},
      {webp_vp8x_header(20000, 20000), "20000x20000"}, {webp_vp8x_header(100000, 1), "100000x1"},
  };
  for (const Bomb& bomb : bombs) {
    const std::string error = error_of(bomb.bytes);
    EXPECT_NE(error.find(std::string(bomb.size) + " pixels: over the limit of 16384 pixels a side"), std::string::npos)
        << error;
  }
  // Within 16384 a side, over 64 Mi pixels in all.
  for (const std::string& bytes : {png_header(9000, 9000), jpeg_header(16000, 8000), webp_vp8l_header(16384, 16384)}) {
    const std::string error = error_of(bytes);
    EXPECT_NE(error.find("over the limit of 67108864 pixels in all"), std::string::npos) << error;
  }
  // A 20000x20000 RGB buffer would be 1.2 GB; nothing near that was ever touched.
  EXPECT_LT(peak_rss_kb() - rss_before, 64 * 1024);
}

TEST(ImageDecode, LimitsApplyToRealFilesToo) {
  for (const auto& [name, bytes] : seed_files()) {
    const std::string error = error_of(bytes, ImageLimits{4, 1 << 20});
    EXPECT_NE(error.find("over the limit of 4 pixels a side"), std::string::npos) << name << ": " << error;
  }
}

TEST(ImageDecode, ZeroWidthOrHeightIsAnError) {
  for (const std::string& bytes : {png_header(0, 10), png_header(10, 0), jpeg_header(10, 0), jpeg_header(0, 7)}) {
    const std::string error = error_of(bytes);
    EXPECT_NE(error.find("image has zero width or height"), std::string::npos) << error;
  }
}

TEST(ImageDecode, OtherTypesAreNamedAsUnsupported) {
  const std::pair<std::string, std::string> cases[] = {
      {"GIF89a\x01\x00\x01\x00\x80\x00\x00", "unsupported image type GIF: send PNG, JPEG or WebP"},
      {std::string("BM\x3a\x00\x00\x00\x00\x00\x00\x00\x36\x00\x00\x00\x28\x00", 16), "unsupported image type BMP"},
      {std::string("II*\0\x08\0\0\0", 8), "unsupported image type TIFF"},
      {"<?xml version=\"1.0\"?><svg xmlns=\"http://www.w3.org/2000/svg\"/>", "unsupported image type SVG"},
      {"hello, this is not an image", "unsupported image type text (not an image)"},
      {"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk", "base64 text of a PNG (decode it first)"},
      {"data:image/png;base64,iVBORw0KGgo=", "a data: URL"},
      {std::string("RIFF\x10\0\0\0WAVEfmt ", 16), "unsupported image type RIFF (not WebP)"},
      {std::string("\x00\x11\x22\x33\xfe\xfd", 6), "unknown image type (the bytes start 00 11 22 33 fe fd)"},
      {"", "the image is empty"},
  };
  for (const auto& [bytes, message] : cases) {
    const std::string error = error_of(bytes);
    EXPECT_NE(error.find(message), std::string::npos) << "got: " << error;
  }
}

}  // namespace
}  // namespace pagoda
