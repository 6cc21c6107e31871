// JPEG through libjpeg-turbo, to the RGB Pillow 9.4's JPEG plugin and convert("RGB") give:
// libjpeg's own YCbCr → RGB (ISLOW DCT, fancy upsampling: the defaults Pillow keeps), grayscale
// replicated, and 4-channel files read as Adobe's inverted CMYK and converted as Pillow's cmyk2rgb.
//
// libjpeg's default error_exit calls exit(). Ours records the message and longjmps back into the
// small C-style functions below (read_header, read_pixels), whose frames hold no object with a
// destructor; the C++ caller owns the decompressor and every buffer.

#include <cstddef>
#include <cstdio>
// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>
#include <jerror.h>

#include <csetjmp>
#include <memory>
#include <string>
#include <vector>

#include "engine/image/image_codecs.h"
#include "pagoda/error.h"

namespace pagoda::image_codecs {
namespace {

// A progressive file can hold any number of scans, each a pass over the whole image; real files
// have about ten. Refusing more keeps a tiny hostile file from costing minutes (libjpeg-turbo's
// advice; djpeg -maxscans).
constexpr int kMaxScans = 500;

struct JpegSession {
  jpeg_decompress_struct cinfo;
  jpeg_error_mgr errors;
  jpeg_progress_mgr progress;
  std::jmp_buf jump;
  int code = 0;  // the libjpeg message code of the error, or one of ours below
  char message[JMSG_LENGTH_MAX] = {};
};
constexpr int kTruncated = -1;
constexpr int kTooManyScans = -2;

JpegSession* session_of(j_common_ptr cinfo) {
  // cinfo is the session's first member.
  return reinterpret_cast<JpegSession*>(cinfo);
}

void on_error(j_common_ptr cinfo) {
  JpegSession* s = session_of(cinfo);
  s->code = cinfo->err->msg_code;
  (*cinfo->err->format_message)(cinfo, s->message);
  std::longjmp(s->jump, 1);
}

// Warnings: libjpeg carries on past corrupt entropy data, as Pillow does, but the memory source's
// "premature end of file" means the image is cut short, which Pillow refuses ("image file is
// truncated"); so do we.
void on_message(j_common_ptr cinfo, int level) {
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) {
    JpegSession* s = session_of(cinfo);
    s->code = kTruncated;
    std::longjmp(s->jump, 1);
  }
}

void on_progress(j_common_ptr cinfo) {
  auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (d->input_scan_number > kMaxScans) {
    JpegSession* s = session_of(cinfo);
    s->code = kTooManyScans;
    std::longjmp(s->jump, 1);
  }
}

[[gnu::noinline]] bool read_header(JpegSession* s, const uint8_t* data, size_t size) {
  if (setjmp(s->jump)) return false;
  jpeg_create_decompress(&s->cinfo);
  jpeg_mem_src(&s->cinfo, data, static_cast<unsigned long>(size));
  s->cinfo.progress = &s->progress;
  jpeg_read_header(&s->cinfo, TRUE);
  return true;
}

// Pillow's unpacker for "CMYK;I" (255 - v), then its cmyk2rgb: nk - nk·c/255 with its rounding.
void cmyk_row_to_rgb(const uint8_t* cmyk, uint8_t* rgb, JDIMENSION width) {
  auto muldiv255 = [](int a, int b) {
    const int t = a * b + 128;
    return ((t >> 8) + t) >> 8;
  };
  for (JDIMENSION x = 0; x < width; ++x, cmyk += 4, rgb += 3) {
    const int nk = 255 - (255 - cmyk[3]);  // 255 - k, k inverted as Pillow's "CMYK;I" reads it
    for (int i = 0; i < 3; ++i) {
      const int v = nk - muldiv255(255 - cmyk[i], nk);
      rgb[i] = uint8_t(v < 0 ? 0 : v > 255 ? 255 : v);
    }
  }
}

// Decodes every scanline into `rgb` (3 bytes a pixel); 4-channel files go through `cmyk_row`.
[[gnu::noinline]] bool read_pixels(JpegSession* s, uint8_t* rgb, uint8_t* cmyk_row) {
  if (setjmp(s->jump)) return false;
  jpeg_start_decompress(&s->cinfo);
  const JDIMENSION width = s->cinfo.output_width;
  while (s->cinfo.output_scanline < s->cinfo.output_height) {
    uint8_t* row = rgb + size_t(s->cinfo.output_scanline) * width * 3;
    JSAMPROW target = cmyk_row ? cmyk_row : row;
    if (jpeg_read_scanlines(&s->cinfo, &target, 1) != 1) {
      std::snprintf(s->message, sizeof s->message, "a scanline did not decode");
      return false;
    }
    if (cmyk_row) cmyk_row_to_rgb(cmyk_row, row, width);
  }
  // No jpeg_finish_decompress: what follows the last scan (EOI, trailing bytes) does not change
  // the pixels, and Pillow accepts a file without it.
  return true;
}

uint32_t be16(const uint8_t* p) { return uint32_t(p[0]) << 8 | p[1]; }

// Checks the frame size of the first SOFn marker, found by walking the marker segments before
// the first scan, so that a header declaring a huge image is refused before libjpeg reads on.
// A walk that meets anything unexpected stops there and leaves the file to libjpeg.
void check_frame_size(std::span<const uint8_t> b, const ImageLimits& limits) {
  size_t at = 2;  // after SOI
  while (at + 4 <= b.size() && b[at] == 0xFF) {
    const uint8_t marker = b[at + 1];
    if (marker == 0xFF) {  // fill byte
      ++at;
      continue;
    }
    if (marker == 0xD9 || marker == 0xDA) return;  // EOI or SOS before a frame header
    const bool standalone = marker == 0x01 || (marker >= 0xD0 && marker <= 0xD8);
    at += 2;
    if (standalone) continue;
    const bool frame = marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
    if (frame) {
      // length (2), precision (1), height (2), width (2)
      if (at + 7 <= b.size()) check_dimensions("JPEG", be16(&b[at + 5]), be16(&b[at + 3]), limits);
      return;
    }
    const size_t length = be16(&b[at]);
    if (length < 2) return;
    at += length;
  }
}

struct SessionGuard {
  JpegSession& s;
  ~SessionGuard() { jpeg_destroy_decompress(&s.cinfo); }
};

}  // namespace

RgbImage decode_jpeg(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  check_frame_size(bytes, limits);
  auto session = std::make_unique<JpegSession>();
  JpegSession& s = *session;
  s.cinfo.err = jpeg_std_error(&s.errors);
  s.errors.error_exit = on_error;
  s.errors.emit_message = on_message;
  s.errors.output_message = [](j_common_ptr) {};
  s.progress.progress_monitor = on_progress;
  const SessionGuard guard{s};  // jpeg_destroy_decompress is safe on a never-created decompressor

  auto fail = [&]() {
    if (s.code == kTruncated) throw Error("JPEG image is truncated: the data ends before the image does");
    if (s.code == kTooManyScans)
      throw Error("JPEG image is corrupt: more than " + std::to_string(kMaxScans) + " scans");
    throw Error(std::string("JPEG image is corrupt: ") + s.message);
  };

  if (!read_header(&s, bytes.data(), bytes.size())) fail();
  check_dimensions("JPEG", s.cinfo.image_width, s.cinfo.image_height, limits);
  const int channels = s.cinfo.num_components;
  if (channels != 1 && channels != 3 && channels != 4) {
    throw Error("JPEG image has " + std::to_string(channels) +
                " color channels: only grayscale, RGB (YCbCr) and CMYK (YCCK) are supported");
  }
  s.cinfo.out_color_space = channels == 4 ? JCS_CMYK : JCS_RGB;  // gray → RGB replicates, as Pillow's L → RGB

  RgbImage image = allocate_rgb(int32_t(s.cinfo.image_width), int32_t(s.cinfo.image_height));
  std::vector<uint8_t> cmyk_row(channels == 4 ? size_t(s.cinfo.image_width) * 4 : 0);
  if (!read_pixels(&s, image.rgb.data(), cmyk_row.empty() ? nullptr : cmyk_row.data())) fail();
  return image;
}

}  // namespace pagoda::image_codecs
