// Resizing and preprocessing against Python: Pillow's resize with each filter on 22 images of odd
// sizes (1x1, 1xN, primes, 1000x3, 2000x1500; noise and smooth gradients; up and down), each
// family's preprocessing pipeline against tests/image/preprocess_reference.py's Pillow + numpy
// port of it, and Qwen2-VL's smart_resize against a port of transformers' function.

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "engine/image/image_resize.h"
#include "engine/vision/image_preprocess.h"
#include "pagoda/error.h"
#include "support/pil_oracle.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

// The folder holding one part of the Python reference (resize, preprocess or smart_resize),
// written on first use; "" when Pillow is missing.
std::string reference_dir(const std::string& part) {
  static std::map<std::string, std::string> written;
  if (!test::pil_missing().empty()) return "";
  auto [at, first] = written.try_emplace(part, test::scratch_path("reference-" + part));
  if (first) test::run_pil_script("preprocess_reference.py", at->second + " " + part);
  return at->second;
}

#define PIL_OR_SKIP() \
  if (const std::string why = test::pil_missing(); !why.empty()) GTEST_SKIP() << why << ": nothing to compare with"

ResampleFilter filter_named(const std::string& name) {
  if (name == "nearest") return ResampleFilter::Nearest;
  if (name == "bilinear") return ResampleFilter::Bilinear;
  if (name == "bicubic") return ResampleFilter::Bicubic;
  if (name == "lanczos") return ResampleFilter::Lanczos;
  throw std::runtime_error("unknown filter " + name);
}

// A deterministic test picture: noise and gradients.
RgbImage picture(int32_t width, int32_t height, uint32_t seed) {
  RgbImage image{width, height, std::vector<uint8_t>(size_t(width) * size_t(height) * 3)};
  uint32_t state = seed * 2654435761u + 1;
  for (size_t i = 0; i < image.rgb.size(); ++i) {
    state = state * 1664525u + 1013904223u;
    image.rgb[i] = (i / 3) % 5 == 0 ? uint8_t(state >> 24) : uint8_t(i * 7 + seed);
  }
  return image;
}

struct FilterTally {
  int cases = 0;
  int max_step = 0;
  int64_t pixels_off = 0;
  int64_t channels_off_by_one = 0;
  int64_t pixels = 0;
};

TEST(ImageResize, EveryFilterEqualsPillowOnOddSizes) {
  PIL_OR_SKIP();
  const std::string dir = reference_dir("resize");
  std::ifstream manifest(dir + "/resize.txt");
  std::map<std::string, FilterTally> tallies;
  std::set<std::string> sources;
  std::map<std::string, RgbImage> loaded;
  std::string line;
  while (std::getline(manifest, line)) {
    std::istringstream fields(line);
    std::string name, source, filter;
    int32_t w = 0, h = 0, tw = 0, th = 0;
    fields >> name >> source >> w >> h >> tw >> th >> filter;
    if (!loaded.count(source)) {
      loaded.clear();  // the cases of one source stand together; keep one in memory
      loaded[source] = test::read_rgb_file(dir + "/" + source + ".src", w, h);
    }
    sources.insert(source);
    const RgbImage want = test::read_rgb_file(dir + "/" + name + ".out", tw, th);
    const test::ImageDifference d = test::compare_images(resize(loaded[source], tw, th, filter_named(filter)), want);
    EXPECT_LE(d.max_step, 1) << name << ": " << d.pixels_off << " pixels differ";
    EXPECT_GE(d.max_step, 0) << name << ": wrong size";
    FilterTally& t = tallies[filter];
    ++t.cases;
    t.max_step = std::max(t.max_step, d.max_step);
    t.pixels_off += d.pixels_off;
    t.channels_off_by_one += d.channels_off_by_one;
    t.pixels += int64_t(tw) * th;
  }
  EXPECT_GE(sources.size(), 20u);
  ASSERT_EQ(tallies.size(), 4u);
  for (const auto& [filter, t] : tallies) {
    std::printf(
        "%-8s %3d resizes of %zu images, %lld pixels: max deviation %d, %lld pixels off, %lld channels off by one\n",
        filter.c_str(), t.cases, sources.size(), static_cast<long long>(t.pixels), t.max_step,
        static_cast<long long>(t.pixels_off), static_cast<long long>(t.channels_off_by_one));
  }
}

TEST(ImageResize, TheSameSizeIsACopy) {
  const RgbImage image = picture(13, 7, 1);
  for (const ResampleFilter f : {ResampleFilter::Nearest, ResampleFilter::Bilinear, ResampleFilter::Lanczos}) {
    const RgbImage same = resize(image, 13, 7, f);
    EXPECT_EQ(same.rgb, image.rgb);
  }
}

TEST(ImageResize, SizesThatAreNotPositiveAreErrors) {
  const RgbImage image = picture(4, 4, 2);
  EXPECT_THROW(resize(image, 0, 4, ResampleFilter::Bicubic), Error);
  EXPECT_THROW(resize(image, 4, -1, ResampleFilter::Bicubic), Error);
  EXPECT_THROW(resize(RgbImage{}, 4, 4, ResampleFilter::Bicubic), Error);
}

TEST(ImageResize, ResizingOnACanvasEqualsResizingThePaddedImage) {
  const std::array<uint8_t, 3> background{122, 116, 104};
  for (const auto& [w, h] :
       {std::pair{37, 11}, std::pair{5, 61}, std::pair{1, 40}, std::pair{40, 1}, std::pair{9, 9}}) {
    const RgbImage image = picture(w, h, uint32_t(w * 100 + h));
    const int32_t side = std::max(w, h);
    RgbImage padded{side, side, std::vector<uint8_t>(size_t(side) * side * 3)};
    for (int32_t y = 0; y < side; ++y) {
      for (int32_t x = 0; x < side; ++x) {
        for (int c = 0; c < 3; ++c) {
          padded.rgb[(size_t(y) * side + x) * 3 + c] =
              x < w && y < h ? image.rgb[(size_t(y) * w + x) * 3 + c] : background[size_t(c)];
        }
      }
    }
    for (const ResampleFilter f :
         {ResampleFilter::Nearest, ResampleFilter::Bilinear, ResampleFilter::Bicubic, ResampleFilter::Lanczos}) {
      for (const int32_t out : {3, side, 2 * side + 1}) {
        EXPECT_EQ(resize_on_canvas(image, side, side, background, out, out, f).rgb, resize(padded, out, out, f).rgb)
            << w << "x" << h << " to " << out;
      }
    }
  }
}

TEST(ImageNormalize, RescalesThenNormalizesPerChannel) {
  const RgbImage image{2, 1, {0, 255, 51, 255, 0, 102}};
  const PixelPlanes planes = normalize(image, {0.5f, 0.5f, 0.0f}, {0.5f, 0.25f, 1.0f});
  ASSERT_EQ(planes.values.size(), 6u);
  const float want[] = {-1.0f, 1.0f, 2.0f, -2.0f, 0.2f, 0.4f};  // R plane, G plane, B plane
  for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(planes.values[i], want[i], 1e-6f) << i;
}

VisionConfig config_for(const std::string& family) {
  VisionConfig c;
  c.projector = family == "llava"    ? ProjectorType::LlavaMlp
                : family == "gemma3" ? ProjectorType::Gemma3
                                     : ProjectorType::Qwen25VL;
  return c;
}

TEST(ImagePreprocess, TokenGridsFollowEachFamily) {
  VisionConfig llava = config_for("llava");
  llava.image_size = 336, llava.patch_size = 14;
  const PreprocessedImage l = preprocess_image(picture(640, 480, 3), llava);
  EXPECT_EQ(l.pixels.width, 336);
  EXPECT_EQ(l.tokens(), 576);

  VisionConfig gemma = config_for("gemma3");
  gemma.image_size = 896, gemma.patch_size = 14, gemma.tokens_per_image = 256;
  const PreprocessedImage g = preprocess_image(picture(64, 48, 4), gemma);
  EXPECT_EQ(g.pixels.height, 896);
  EXPECT_EQ(g.token_rows, 16);
  EXPECT_EQ(g.tokens(), 256);

  VisionConfig qwen = config_for("qwen");
  qwen.patch_size = 14, qwen.spatial_merge = 2;
  const PreprocessedImage q = preprocess_image(picture(640, 480, 5), qwen);  // 480 → 476, 640 → 644
  EXPECT_EQ(q.pixels.height, 476);
  EXPECT_EQ(q.pixels.width, 644);
  EXPECT_EQ(q.token_rows, 17);
  EXPECT_EQ(q.token_cols, 23);
}

TEST(ImagePreprocess, ConfigsAndImagesTheProcessorsRefuseAreErrors) {
  VisionConfig qwen = config_for("qwen");
  qwen.patch_size = 14, qwen.spatial_merge = 2;
  test::expect_error_containing([&] { preprocess_image(picture(201, 1, 6), qwen); }, "aspect ratio is over 200:1");
  VisionConfig gemma = config_for("gemma3");
  gemma.image_size = 896, gemma.patch_size = 14, gemma.tokens_per_image = 200;
  test::expect_error_containing([&] { preprocess_image(picture(8, 8, 7), gemma); }, "is not a square");
  VisionConfig llava = config_for("llava");
  test::expect_error_containing([&] { preprocess_image(picture(8, 8, 7), llava); }, "cannot take an image");
}

TEST(ImagePreprocess, EachFamilyEqualsItsPythonPipeline) {
  PIL_OR_SKIP();
  const std::string dir = reference_dir("preprocess");
  std::ifstream manifest(dir + "/preprocess.txt");
  std::map<std::string, std::pair<int, double>> worst;  // family → (cases, largest |difference|)
  std::string line;
  while (std::getline(manifest, line)) {
    std::istringstream fields(line);
    std::string name, family, source;
    int32_t w = 0, h = 0, out_w = 0, out_h = 0, rows = 0, cols = 0;
    VisionConfig c;
    std::string mean_std[6];
    fields >> name >> family >> source >> w >> h;
    c = config_for(family);
    fields >> c.image_size >> c.patch_size >> c.spatial_merge >> c.tokens_per_image >> c.min_pixels >> c.max_pixels;
    for (std::string& v : mean_std) fields >> v;
    for (int i = 0; i < 3; ++i) {
      c.image_mean[size_t(i)] = std::strtof(mean_std[i].c_str(), nullptr);
      c.image_std[size_t(i)] = std::strtof(mean_std[i + 3].c_str(), nullptr);
    }
    fields >> out_w >> out_h >> rows >> cols;
    const RgbImage image = test::read_rgb_file(dir + "/" + source + ".src", w, h);
    const PreprocessedImage got = preprocess_image(image, c);
    ASSERT_EQ(got.pixels.width, out_w) << name;
    ASSERT_EQ(got.pixels.height, out_h) << name;
    EXPECT_EQ(got.token_rows, rows) << name;
    EXPECT_EQ(got.token_cols, cols) << name;
    const std::string bytes = test::read_file(dir + "/" + name + ".f32");
    ASSERT_EQ(bytes.size(), got.pixels.values.size() * sizeof(float)) << name;
    std::vector<float> want(got.pixels.values.size());
    std::memcpy(want.data(), bytes.data(), bytes.size());
    double largest = 0;
    for (size_t i = 0; i < want.size(); ++i)
      largest = std::max(largest, double(std::fabs(got.pixels.values[i] - want[i])));
    EXPECT_LE(largest, 1e-6) << name;
    auto& [cases, family_worst] = worst[family];
    ++cases;
    family_worst = std::max(family_worst, largest);
  }
  ASSERT_EQ(worst.size(), 3u);
  for (const auto& [family, w] : worst) {
    std::printf("%-7s %2d images: largest difference from the Python pipeline %.3g\n", family.c_str(), w.first,
                w.second);
  }
}

TEST(ImagePreprocess, QwenSmartResizeEqualsTransformers) {
  PIL_OR_SKIP();
  std::ifstream table(reference_dir("smart_resize") + "/smart_resize.txt");
  std::string line;
  int cases = 0, refused = 0;
  while (std::getline(table, line)) {
    std::istringstream fields(line);
    int32_t h = 0, w = 0, factor = 0;
    int64_t lo = 0, hi = 0;
    std::string result;
    fields >> h >> w >> factor >> lo >> hi >> result;
    ++cases;
    if (result == "error") {
      ++refused;
      EXPECT_THROW(qwen_smart_resize(h, w, factor, lo, hi), Error) << line;
      continue;
    }
    const int32_t want_h = std::stoi(result);
    int32_t want_w = 0;
    fields >> want_w;
    const ImageExtent got = qwen_smart_resize(h, w, factor, lo, hi);
    EXPECT_EQ(got.height, want_h) << line;
    EXPECT_EQ(got.width, want_w) << line;
  }
  std::printf("smart_resize: %d cases equal transformers' (%d refused for their aspect ratio)\n", cases, refused);
  EXPECT_GT(cases, 10000);
}

}  // namespace
}  // namespace pagoda
