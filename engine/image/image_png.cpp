// PNG through libpng, to the RGB Pillow 9.4's PNG plugin and convert("RGB") give.
//
// libpng reports errors by longjmp. The setjmp frames live in the small C-style functions below
// (read_header, read_rows), whose frames hold no object with a destructor; the C++ caller owns
// every buffer and the png_struct, and turns a failure into pagoda::Error after the jump.

#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "engine/image/image_codecs.h"
#include "pagoda/error.h"

namespace pagoda::image_codecs {
namespace {

// What libpng's callbacks share with the decoder: the input and the first error.
struct PngInput {
  const uint8_t* data = nullptr;
  size_t size = 0;
  size_t at = 0;
  bool truncated = false;
  char error[200] = {};
};

void read_bytes(png_structp png, png_bytep out, size_t n) {
  auto* in = static_cast<PngInput*>(png_get_io_ptr(png));
  if (n > in->size - in->at) {
    in->truncated = true;
    png_error(png, "the data ends early");
  }
  std::memcpy(out, in->data + in->at, n);
  in->at += n;
}

void on_error(png_structp png, png_const_charp message) {
  auto* in = static_cast<PngInput*>(png_get_error_ptr(png));
  if (in->error[0] == '\0') std::snprintf(in->error, sizeof in->error, "%s", message);
  png_longjmp(png, 1);
}

void on_warning(png_structp, png_const_charp) {}  // libpng carries on; so does Pillow

// The layout libpng hands back after read_header's transforms: bytes per pixel of a row.
enum class RowLayout { Rgb8, Palette8, Gray16 };

// Reads the chunks up to the pixels and sets the transforms that make every layout but two
// 8-bit RGB: palette images stay indices (mapped through Pillow's palette below), 16-bit gray
// stays 16-bit (Pillow clips it, it does not keep the high byte).
[[gnu::noinline]] bool read_header(png_structp png, png_infop info, RowLayout* layout) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_info(png, info);
  const int color = png_get_color_type(png, info);
  const int depth = png_get_bit_depth(png, info);
  if (color == PNG_COLOR_TYPE_PALETTE) {
    png_set_packing(png);  // 1-, 2- and 4-bit indices to a byte each, unscaled
    *layout = RowLayout::Palette8;
  } else if (color == PNG_COLOR_TYPE_GRAY && depth == 16) {
    *layout = RowLayout::Gray16;
  } else {
    if (depth == 16) png_set_strip_16(png);  // the high byte, as Pillow's ;16B unpackers
    if (color & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(png);
    if (!(color & PNG_COLOR_MASK_COLOR)) {
      if (depth < 8) png_set_expand_gray_1_2_4_to_8(png);  // v · 255 / (2^depth - 1), as Pillow's L;2, L;4, 1
      png_set_gray_to_rgb(png);
    }
    *layout = RowLayout::Rgb8;
  }
  // tRNS is left alone (no png_set_tRNS_to_alpha): Pillow drops transparency going to RGB.
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  return true;
}

[[gnu::noinline]] bool read_rows(png_structp png, png_bytep* rows) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_image(png, rows);
  return true;
}

uint32_t be32(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }

// Pillow's palette: the file's PLTE entries, then its default ramp (i, i, i) for the rest.
std::vector<uint8_t> pillow_palette(png_structp png, png_infop info) {
  std::vector<uint8_t> table(256 * 3);
  for (int i = 0; i < 256; ++i) table[3 * i] = table[3 * i + 1] = table[3 * i + 2] = uint8_t(i);
  png_colorp entries = nullptr;
  int n = 0;
  if (png_get_PLTE(png, info, &entries, &n) & PNG_INFO_PLTE) {
    for (int i = 0; i < n && i < 256; ++i) {
      table[3 * i] = entries[i].red;
      table[3 * i + 1] = entries[i].green;
      table[3 * i + 2] = entries[i].blue;
    }
  }
  return table;
}

// Widens each row, written at its start by libpng, to RGB in place (right to left, so no byte is
// overwritten before it is read).
void expand_rows(RgbImage& image, RowLayout layout, const std::vector<uint8_t>& palette) {
  const size_t width = size_t(image.width);
  for (int32_t y = 0; y < image.height; ++y) {
    uint8_t* row = image.rgb.data() + size_t(y) * width * 3;
    for (size_t x = width; x-- > 0;) {
      if (layout == RowLayout::Palette8) {
        const uint8_t* rgb = &palette[size_t(row[x]) * 3];
        row[3 * x] = rgb[0], row[3 * x + 1] = rgb[1], row[3 * x + 2] = rgb[2];
      } else {
        const unsigned v = unsigned(row[2 * x]) << 8 | row[2 * x + 1];
        row[3 * x] = row[3 * x + 1] = row[3 * x + 2] = uint8_t(v > 255 ? 255 : v);  // Pillow's i2rgb clip
      }
    }
  }
}

// The png_struct and its info, destroyed however decoding ends.
struct PngHandles {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~PngHandles() { png_destroy_read_struct(&png, info ? &info : nullptr, nullptr); }
};

[[noreturn]] void fail(const PngInput& in) {
  if (in.truncated) throw Error("PNG image is truncated: the data ends before the image does");
  throw Error(std::string("PNG image is corrupt: ") + (in.error[0] ? in.error : "libpng failed"));
}

}  // namespace

RgbImage decode_png(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  // The size from IHDR (always the first chunk, at a fixed offset), checked before libpng reads
  // anything else; libpng then refuses a file whose first chunk is not IHDR.
  if (bytes.size() >= 24 && std::memcmp(bytes.data() + 12, "IHDR", 4) == 0) {
    check_dimensions("PNG", be32(bytes.data() + 16), be32(bytes.data() + 20), limits);
  }
  PngInput in{bytes.data(), bytes.size()};
  PngHandles h;
  h.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &in, on_error, on_warning);
  if (h.png) h.info = png_create_info_struct(h.png);
  if (!h.png || !h.info) throw Error("PNG decoder could not start (out of memory)");
  png_set_read_fn(h.png, &in, read_bytes);
  png_set_user_limits(h.png, uint32_t(limits.max_side), uint32_t(limits.max_side));

  RowLayout layout = RowLayout::Rgb8;
  if (!read_header(h.png, h.info, &layout)) fail(in);
  const uint32_t width = png_get_image_width(h.png, h.info);
  const uint32_t height = png_get_image_height(h.png, h.info);
  check_dimensions("PNG", width, height, limits);
  const size_t row_bytes = png_get_rowbytes(h.png, h.info);
  const size_t expected = layout == RowLayout::Rgb8     ? 3 * size_t(width)
                          : layout == RowLayout::Gray16 ? 2 * size_t(width)
                                                        : width;
  if (row_bytes != expected) throw Error("PNG image has a pixel layout this decoder does not read");

  RgbImage image = allocate_rgb(int32_t(width), int32_t(height));
  std::vector<png_bytep> rows(height);
  for (uint32_t y = 0; y < height; ++y) rows[y] = image.rgb.data() + size_t(y) * width * 3;
  if (!read_rows(h.png, rows.data())) fail(in);
  // The rest of the file (chunks after the pixels, IEND) is not read: Pillow does not need it either.
  if (layout != RowLayout::Rgb8) expand_rows(image, layout, pillow_palette(h.png, h.info));
  return image;
}

}  // namespace pagoda::image_codecs
