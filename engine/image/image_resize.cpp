// Pillow's resize reproduced for 8-bit RGB (see image_resize.h). The arithmetic follows
// libImaging/Resample.c step for step, in the same order and precision (double coefficients,
// 22-bit fixed point, int accumulators), because any reordering moves a pixel by one now and then.

#include "engine/image/image_resize.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "pagoda/error.h"

namespace pagoda {
namespace {

// Pillow's PRECISION_BITS: 8 bits of result, 2 for overflow of negative lobes, in an int.
constexpr int kPrecisionBits = 32 - 8 - 2;

double bilinear_filter(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

double bicubic_filter(double x) {
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

double sinc(double x) {
  if (x == 0.0) return 1.0;
  x = x * M_PI;
  return std::sin(x) / x;
}

double lanczos_filter(double x) { return -3.0 <= x && x < 3.0 ? sinc(x) * sinc(x / 3) : 0.0; }

struct Filter {
  double (*weight)(double);
  double support;
};

Filter filter_of(ResampleFilter f) {
  switch (f) {
    case ResampleFilter::Bilinear: return {bilinear_filter, 1.0};
    case ResampleFilter::Bicubic: return {bicubic_filter, 2.0};
    case ResampleFilter::Lanczos: return {lanczos_filter, 3.0};
    case ResampleFilter::Nearest: break;
  }
  return {nullptr, 0.0};
}

// For each output pixel along one axis: the first input pixel it reads, how many, and their
// fixed-point weights (ksize slots per output pixel).
struct Taps {
  int ksize = 0;
  std::vector<int> first, count;
  std::vector<int32_t> weights;
};

Taps taps_for(int in_size, int out_size, const Filter& filter) {
  // Pillow's box is (0, in_size) in float; its width divided in double.
  const double scale = double(float(in_size)) / out_size;
  const double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = filter.support * filterscale;
  Taps t;
  t.ksize = int(std::ceil(support)) * 2 + 1;
  t.first.resize(size_t(out_size));
  t.count.resize(size_t(out_size));
  t.weights.assign(size_t(out_size) * size_t(t.ksize), 0);
  std::vector<double> k(size_t(t.ksize));
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    int xmin = int(center - support + 0.5);  // truncation, as Pillow's cast
    if (xmin < 0) xmin = 0;
    int xmax = int(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      const double w = filter.weight((x + xmin - center + 0.5) * ss);
      k[size_t(x)] = w;
      ww += w;
    }
    int32_t* out = &t.weights[size_t(xx) * size_t(t.ksize)];
    for (int x = 0; x < xmax; ++x) {
      const double w = ww != 0.0 ? k[size_t(x)] / ww : k[size_t(x)];
      out[x] = w < 0 ? int32_t(-0.5 + w * (1 << kPrecisionBits)) : int32_t(0.5 + w * (1 << kPrecisionBits));
    }
    t.first[size_t(xx)] = xmin;
    t.count[size_t(xx)] = xmax;
  }
  return t;
}

uint8_t clip8(int32_t sum) {
  const int32_t v = sum >> kPrecisionBits;
  return uint8_t(v < 0 ? 0 : v > 255 ? 255 : v);
}

// `image` at the top-left of a width × height canvas of `background`: the picture a resize reads,
// served a row at a time so a padded canvas is never made whole.
struct Canvas {
  const RgbImage& image;
  int32_t width = 0, height = 0;
  std::array<uint8_t, 3> background{};

  // Row y, in `scratch` (width · 3 bytes) unless it is the image's own unpadded row.
  const uint8_t* row(int32_t y, std::vector<uint8_t>& scratch) const {
    const uint8_t* src = y < image.height ? image.rgb.data() + size_t(y) * size_t(image.width) * 3 : nullptr;
    if (src && image.width == width) return src;
    const size_t copied = src ? size_t(image.width) * 3 : 0;
    if (src) std::copy(src, src + copied, scratch.begin());
    for (size_t i = copied; i < size_t(width) * 3; ++i) scratch[i] = background[i % 3];
    return scratch.data();
  }
};

// Canvas rows [row0, row0 + out.height), resampled along x into `out` (out.width wide).
void horizontal_pass(const Canvas& in, int32_t row0, const Taps& t, RgbImage& out) {
  std::vector<uint8_t> scratch(size_t(in.width) * 3);
  const size_t out_stride = size_t(out.width) * 3;
  for (int32_t y = 0; y < out.height; ++y) {
    uint8_t* dst = out.rgb.data() + size_t(y) * out_stride;
    if (y + row0 > in.image.height && y > 0) {  // background only, as the row before
      std::copy(dst - out_stride, dst, dst);
      continue;
    }
    const uint8_t* src = in.row(y + row0, scratch);
    for (int32_t xx = 0; xx < out.width; ++xx) {
      const int32_t* k = &t.weights[size_t(xx) * size_t(t.ksize)];
      const uint8_t* p = src + size_t(t.first[size_t(xx)]) * 3;
      int32_t s0 = 1 << (kPrecisionBits - 1), s1 = s0, s2 = s0;
      for (int x = 0; x < t.count[size_t(xx)]; ++x, p += 3) {
        s0 += p[0] * k[x];
        s1 += p[1] * k[x];
        s2 += p[2] * k[x];
      }
      dst[3 * xx] = clip8(s0), dst[3 * xx + 1] = clip8(s1), dst[3 * xx + 2] = clip8(s2);
    }
  }
}

// Canvas rows [row0, row0 + out.height) as they are (the canvas is already as wide as wanted).
void copy_rows(const Canvas& in, int32_t row0, RgbImage& out) {
  std::vector<uint8_t> scratch(size_t(in.width) * 3);
  for (int32_t y = 0; y < out.height; ++y) {
    const uint8_t* src = in.row(y + row0, scratch);
    std::copy(src, src + scratch.size(), out.rgb.begin() + ptrdiff_t(size_t(y) * scratch.size()));
  }
}

// `in` resampled along y into `out`; the taps' first rows index `in` less `row0`.
void vertical_pass(const RgbImage& in, int32_t row0, const Taps& t, RgbImage& out) {
  const size_t stride = size_t(in.width) * 3;
  for (int32_t yy = 0; yy < out.height; ++yy) {
    const int32_t* k = &t.weights[size_t(yy) * size_t(t.ksize)];
    const uint8_t* top = in.rgb.data() + size_t(t.first[size_t(yy)] - row0) * stride;
    uint8_t* dst = out.rgb.data() + size_t(yy) * stride;
    for (size_t i = 0; i < stride; ++i) {
      int32_t s = 1 << (kPrecisionBits - 1);
      for (int y = 0; y < t.count[size_t(yy)]; ++y) s += top[size_t(y) * stride + i] * k[y];
      dst[i] = clip8(s);
    }
  }
}

RgbImage blank(int32_t width, int32_t height) {
  RgbImage image;
  image.width = width;
  image.height = height;
  image.rgb.assign(size_t(width) * size_t(height) * 3, 0);
  return image;
}

// Pillow's NEAREST: an affine scale whose source coordinate steps by in/out from half a step in,
// accumulated in double and truncated (ImagingScaleAffine).
RgbImage resize_nearest(const Canvas& in, int32_t width, int32_t height) {
  const double ax = double(float(in.width)) / width, ay = double(float(in.height)) / height;
  std::vector<int32_t> column(size_t(width), 0);
  int32_t xmin = width, xmax = 0;
  double xo = ax * 0.5;
  for (int32_t x = 0; x < width; ++x, xo += ax) {
    const int32_t xin = xo < 0.0 ? -1 : int32_t(xo);
    if (xin >= 0 && xin < in.width) {
      xmax = x + 1;
      if (x < xmin) xmin = x;
      column[size_t(x)] = xin;
    }
  }
  RgbImage out = blank(width, height);
  std::vector<uint8_t> scratch(size_t(in.width) * 3);
  double yo = ay * 0.5;
  for (int32_t y = 0; y < height; ++y, yo += ay) {
    const int32_t yin = yo < 0.0 ? -1 : int32_t(yo);
    if (yin < 0 || yin >= in.height) continue;
    const uint8_t* src = in.row(yin, scratch);
    uint8_t* dst = out.rgb.data() + size_t(y) * size_t(width) * 3;
    for (int32_t x = xmin; x < xmax; ++x) {
      const uint8_t* p = src + size_t(column[size_t(x)]) * 3;
      dst[3 * x] = p[0], dst[3 * x + 1] = p[1], dst[3 * x + 2] = p[2];
    }
  }
  return out;
}

RgbImage resize_canvas(const Canvas& canvas, int32_t width, int32_t height, ResampleFilter filter) {
  if (width < 1 || height < 1 || canvas.width < 1 || canvas.height < 1 || canvas.width < canvas.image.width ||
      canvas.height < canvas.image.height) {
    throw Error("cannot resize a " + std::to_string(canvas.width) + "x" + std::to_string(canvas.height) + " image to " +
                std::to_string(width) + "x" + std::to_string(height) + ": sizes must be positive");
  }
  if (canvas.image.rgb.size() != size_t(canvas.image.width) * size_t(canvas.image.height) * 3) {
    throw Error("cannot resize an image whose pixel buffer does not match its size");
  }
  if (width == canvas.width && height == canvas.height) {  // Pillow returns a copy
    RgbImage out = blank(width, height);
    copy_rows(canvas, 0, out);
    return out;
  }
  if (filter == ResampleFilter::Nearest) return resize_nearest(canvas, width, height);
  // Rows of the canvas resampled across (or copied when the width stays), then down; the
  // horizontal pass only makes the rows the vertical pass reads, as Pillow's.
  const Filter f = filter_of(filter);
  const Taps vertical = taps_for(canvas.height, height, f);
  const bool same_height = height == canvas.height;
  const int32_t row0 = same_height ? 0 : vertical.first.front();
  const int32_t row_end = same_height ? height : vertical.first.back() + vertical.count.back();
  RgbImage rows = blank(width, row_end - row0);
  if (width == canvas.width) {
    copy_rows(canvas, row0, rows);
  } else {
    horizontal_pass(canvas, row0, taps_for(canvas.width, width, f), rows);
  }
  if (same_height) return rows;
  RgbImage out = blank(width, height);
  vertical_pass(rows, row0, vertical, out);
  return out;
}

}  // namespace

RgbImage resize(const RgbImage& image, int32_t width, int32_t height, ResampleFilter filter) {
  return resize_canvas(Canvas{image, image.width, image.height}, width, height, filter);
}

RgbImage resize_on_canvas(const RgbImage& image, int32_t canvas_width, int32_t canvas_height,
                          const std::array<uint8_t, 3>& background, int32_t width, int32_t height,
                          ResampleFilter filter) {
  return resize_canvas(Canvas{image, canvas_width, canvas_height, background}, width, height, filter);
}

PixelPlanes normalize(const RgbImage& image, const std::array<float, 3>& mean, const std::array<float, 3>& std_dev) {
  PixelPlanes planes;
  planes.width = image.width;
  planes.height = image.height;
  const size_t n = size_t(image.width) * size_t(image.height);
  planes.values.resize(3 * n);
  for (int c = 0; c < 3; ++c) {
    float* plane = planes.values.data() + size_t(c) * n;
    for (size_t i = 0; i < n; ++i) {
      const float v = float(double(image.rgb[3 * i + size_t(c)]) * (1.0 / 255.0));
      plane[i] = (v - mean[size_t(c)]) / std_dev[size_t(c)];
    }
  }
  return planes;
}

}  // namespace pagoda
