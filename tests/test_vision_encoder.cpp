// The vision encoders (engine/forward/vision_encoder.h) as facts: on pagoda-synth's tiny
// projector files each family computes what the numpy reference written from transformers'
// modeling files computes (tests/vision/reference_vision.py; its outputs kept in
// tests/data/vision/, see the README there); an image's embeddings are the same bits alone or
// batched with other images, on one thread or two; F16 weights stay close to F32; bad images are
// refused naming the problem. A disabled test times real-size encoders.

#include <gtest/gtest.h>
#include <tbb/task_arena.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/forward/vision_encoder.h"
#include "engine/vision/vision_model.h"
#include "pagoda/error.h"
#include "support/test_support.h"
#include "testing/synth_random.h"
#include "testing/vision_synth.h"

namespace pagoda {
namespace {

using Family = ProjectorType;
constexpr uint64_t kSeed = 38;

std::string family_file_name(Family family) {
  switch (family) {
    case Family::LlavaMlp: return "llava";
    case Family::Gemma3: return "gemma3";
    case Family::Qwen2VL: return "qwen2vl";
    case Family::Qwen25VL: return "qwen25vl";
  }
  return "";
}

// The family's tiny projector (seed kSeed) written to `path`.
void write_tiny(Family family, GgmlType type, const std::string& path) {
  VisionSynthSpec spec;
  spec.config = find_vision_synth_preset(family, "tiny").config;
  spec.seed = kSeed;
  spec.type = type;
  write_synth_projector(path, spec);
}

// The tiny projector of a family, written once per program and type, loaded.
const VisionModel& tiny_model(Family family, GgmlType type = GgmlType::F32) {
  static std::map<std::pair<Family, GgmlType>, VisionModel> models;
  auto [it, fresh] = models.try_emplace({family, type});
  if (fresh) {
    const std::string path =
        test::scratch_path(family_file_name(family) + (type == GgmlType::F16 ? "-f16" : "") + ".gguf");
    write_tiny(family, type, path);
    it->second = load_projector(path);
  }
  return it->second;
}

// Normalized-looking planes, uniform in [-2, 2), from raw mt19937_64 bits (the same on every platform).
PixelPlanes random_planes(int32_t width, int32_t height, uint64_t seed) {
  std::mt19937_64 rng(seed);
  PixelPlanes p{width, height, std::vector<float>(3 * size_t(width) * size_t(height))};
  for (float& v : p.values) v = 2.0f * uniform_symmetric(rng);
  return p;
}

std::string xxh3_hex(const void* data, size_t bytes) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(XXH3_64bits(data, bytes)));
  return text;
}

// The recorded cases: a family's tiny projector and an image of a size it takes.
struct RecordedCase {
  std::string name;
  Family family;
  int32_t width, height;
  uint64_t planes_seed;
};
const std::vector<RecordedCase>& recorded_cases() {
  static const std::vector<RecordedCase> cases = {
      {"llava", Family::LlavaMlp, 56, 56, 1},
      {"gemma3", Family::Gemma3, 112, 112, 2},
      {"qwen2vl", Family::Qwen2VL, 84, 56, 3},
      // 9×5 merged units: windows of 4×4 units, the right and bottom ones partial.
      {"qwen25vl_windows", Family::Qwen25VL, 252, 140, 4},
      // 4×4 units: exactly one window (transformers pads a whole empty window here).
      {"qwen25vl_one_window", Family::Qwen25VL, 112, 112, 5},
  };
  return cases;
}

struct Deviation {
  double relative = 0;  // ‖got - want‖ / ‖want‖
  double max_abs = 0;
};
Deviation deviation(const float* got, const float* want, size_t n) {
  double diff = 0, norm = 0;
  Deviation d;
  for (size_t i = 0; i < n; ++i) {
    const double e = double(got[i]) - double(want[i]);
    diff += e * e;
    norm += double(want[i]) * double(want[i]);
    d.max_abs = std::max(d.max_abs, std::abs(e));
  }
  d.relative = std::sqrt(diff) / std::sqrt(norm);
  return d;
}

struct Encoded {
  std::vector<float> rows;
  std::vector<int32_t> tokens;
};
Encoded encode(VisionEncoder& encoder, const std::vector<PixelPlanes>& images) {
  Encoded e;
  encoder.encode(images, e.rows, e.tokens);
  return e;
}

// Writes the recorded cases' files and their manifest for reference_vision.py --cases into
// $PAGODA_VISION_RECORD (tests/data/vision/README.md); skipped otherwise.
TEST(VisionEncoder, RecordsTheReferenceCasesWhenAsked) {
  const char* dir = std::getenv("PAGODA_VISION_RECORD");
  if (!dir) GTEST_SKIP() << "set PAGODA_VISION_RECORD to a folder to write the reference cases there";
  nlohmann::json cases = nlohmann::json::array();
  for (const RecordedCase& k : recorded_cases()) {
    const std::string projector = family_file_name(k.family) + ".gguf";
    write_tiny(k.family, GgmlType::F32, std::string(dir) + "/" + projector);
    const std::string bytes = test::read_file(std::string(dir) + "/" + projector);
    const PixelPlanes planes = random_planes(k.width, k.height, k.planes_seed);
    const std::string planes_file = k.name + ".f32";
    std::ofstream(std::string(dir) + "/" + planes_file, std::ios::binary)
        .write(reinterpret_cast<const char*>(planes.values.data()), std::streamsize(planes.values.size() * 4));
    cases.push_back({{"name", k.name},
                     {"projector", projector},
                     {"projector_xxh3", xxh3_hex(bytes.data(), bytes.size())},
                     {"planes", planes_file},
                     {"planes_xxh3", xxh3_hex(planes.values.data(), planes.values.size() * 4)},
                     {"width", k.width},
                     {"height", k.height}});
  }
  std::ofstream(std::string(dir) + "/manifest.json") << nlohmann::json{{"cases", cases}}.dump(1) << "\n";
}

TEST(VisionEncoder, EachFamilyMatchesTheNumpyReferenceOnTheRecordedImages) {
  const nlohmann::json data = nlohmann::json::parse(
      test::read_file(std::string(PAGODA_SOURCE_DIR) + "/tests/data/vision/reference_outputs.json"));
  ASSERT_EQ(data.at("cases").size(), recorded_cases().size());
  tbb::task_arena arena(2);
  for (const RecordedCase& k : recorded_cases()) {
    SCOPED_TRACE(k.name);
    const nlohmann::json* recorded = nullptr;
    for (const nlohmann::json& c : data.at("cases"))
      if (c.at("name") == k.name) recorded = &c;
    ASSERT_NE(recorded, nullptr) << "no recorded outputs for " << k.name;
    // The outputs hold only for the very bytes they were computed from.
    const VisionModel& model = tiny_model(k.family);
    const std::string bytes = test::read_file(model.path);
    const PixelPlanes planes = random_planes(k.width, k.height, k.planes_seed);
    ASSERT_EQ(xxh3_hex(bytes.data(), bytes.size()), recorded->at("projector_xxh3").get<std::string>())
        << "pagoda-synth's " << family_file_name(k.family)
        << " projector is no longer the file the reference outputs were computed from: record them again "
           "(tests/data/vision/README.md)";
    ASSERT_EQ(xxh3_hex(planes.values.data(), planes.values.size() * 4), recorded->at("planes_xxh3").get<std::string>())
        << "the test's planes changed: record the reference outputs again (tests/data/vision/README.md)";

    VisionEncoder encoder(model, arena);
    const Encoded got = encode(encoder, {planes});
    const std::vector<float> want = recorded->at("embeddings");
    ASSERT_EQ(got.tokens, std::vector<int32_t>{recorded->at("tokens").get<int32_t>()});
    ASSERT_EQ(got.rows.size(), want.size());
    const Deviation d = deviation(got.rows.data(), want.data(), want.size());
    std::printf("%-20s %3d tokens: relative %.2e, max abs %.2e\n", k.name.c_str(), got.tokens[0], d.relative,
                d.max_abs);
    EXPECT_LT(d.relative, 1e-4);
  }
}

TEST(VisionEncoder, AnImageGivesTheSameBitsAloneOrBatchedWithOthersOnOneOrTwoThreads) {
  tbb::task_arena one(1), two(2);
  for (const Family family : {Family::LlavaMlp, Family::Gemma3, Family::Qwen2VL, Family::Qwen25VL}) {
    SCOPED_TRACE(family_file_name(family));
    const VisionModel& model = tiny_model(family);
    const bool qwen = family == Family::Qwen2VL || family == Family::Qwen25VL;
    const int32_t side = model.config.image_size;
    // Qwen takes other sizes: the companions differ in size, one of them over several windows.
    const PixelPlanes image = random_planes(qwen ? 140 : side, qwen ? 112 : side, 11);
    const PixelPlanes before = random_planes(qwen ? 252 : side, qwen ? 168 : side, 12);
    const PixelPlanes after = random_planes(qwen ? 56 : side, qwen ? 84 : side, 13);
    VisionEncoder on_one(model, one), on_two(model, two);
    const Encoded alone = encode(on_one, {image});
    const Encoded alone_two = encode(on_two, {image});
    const Encoded batched = encode(on_two, {before, image, after});
    ASSERT_EQ(batched.tokens.size(), 3u);
    ASSERT_EQ(batched.tokens[1], alone.tokens[0]);
    const size_t width = size_t(model.config.projection_dim);
    const std::vector<float> in_batch(
        batched.rows.begin() + ptrdiff_t(size_t(batched.tokens[0]) * width),
        batched.rows.begin() + ptrdiff_t(size_t(batched.tokens[0] + batched.tokens[1]) * width));
    EXPECT_EQ(alone.rows, alone_two.rows) << "one thread and two differ";
    EXPECT_EQ(alone.rows, in_batch) << "alone and batched differ";
    // And the companions are the images they would be alone too.
    const Encoded first = encode(on_one, {before});
    EXPECT_TRUE(std::equal(first.rows.begin(), first.rows.end(), batched.rows.begin()));
  }
}

TEST(VisionEncoder, F16WeightsStayWithinOnePercentOfF32) {
  tbb::task_arena arena(2);
  for (const RecordedCase& k : recorded_cases()) {
    SCOPED_TRACE(k.name);
    const PixelPlanes planes = random_planes(k.width, k.height, k.planes_seed);
    VisionEncoder f32(tiny_model(k.family), arena), f16(tiny_model(k.family, GgmlType::F16), arena);
    const Encoded want = encode(f32, {planes}), got = encode(f16, {planes});
    ASSERT_EQ(got.rows.size(), want.rows.size());
    const Deviation d = deviation(got.rows.data(), want.rows.data(), want.rows.size());
    std::printf("%-20s F16 against F32: relative %.2e, max abs %.2e\n", k.name.c_str(), d.relative, d.max_abs);
    EXPECT_LT(d.relative, 1e-2);
    EXPECT_GT(d.relative, 0.0) << "the F16 file was read as F32?";
  }
}

TEST(VisionEncoder, BadImagesAreRefusedNamingTheProblem) {
  tbb::task_arena arena(1);
  VisionEncoder llava(tiny_model(Family::LlavaMlp), arena), qwen(tiny_model(Family::Qwen25VL), arena);
  std::vector<float> out;
  std::vector<int32_t> tokens;
  auto refuses = [&](VisionEncoder& encoder, std::vector<PixelPlanes> images, const std::string& needle) {
    test::expect_error_containing([&] { encoder.encode(images, out, tokens); }, needle);
  };
  refuses(llava, {PixelPlanes{}}, "image 0: vision encoder: the image is empty (0×0)");
  refuses(qwen, {random_planes(56, 56, 1), PixelPlanes{56, 0, {}}}, "image 1: vision encoder: the image is empty");
  PixelPlanes short_planes = random_planes(56, 56, 1);
  short_planes.values.pop_back();
  refuses(llava, {short_planes}, "image 0: 9407 plane values for a 56×56 image, not 3·56·56");
  refuses(llava, {random_planes(112, 112, 1)}, "a 112×112 image; mlp takes 56×56 only");
  refuses(llava, {random_planes(56, 84, 1)}, "takes 56×56 only");
  refuses(qwen, {random_planes(56, 70, 1)}, "a 56×70 image is not whole 28-pixel units");
  const PixelPlanes* missing[] = {nullptr};
  test::expect_error_containing([&] { llava.encode(missing, out, tokens); }, "image 0 is missing");
  // Nothing encoded is fine.
  llava.encode(std::span<const PixelPlanes>(), out, tokens);
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(tokens.empty());
}

TEST(VisionEncoder, TokensAndFlopsFollowTheImageSize) {
  tbb::task_arena arena(1);
  VisionEncoder llava(tiny_model(Family::LlavaMlp), arena), gemma(tiny_model(Family::Gemma3), arena),
      qwen(tiny_model(Family::Qwen25VL), arena);
  EXPECT_EQ(llava.image_tokens(56, 56), 16);
  EXPECT_EQ(gemma.image_tokens(112, 112), 4);
  EXPECT_EQ(qwen.image_tokens(252, 140), 9 * 5);
  EXPECT_GT(llava.flops(56, 56), 0.0);
  // Twice the patches cost more than twice: attention grows with their square.
  EXPECT_GT(qwen.flops(112, 56), 2 * qwen.flops(56, 56));
  test::expect_error_containing([&] { qwen.flops(30, 28); }, "not whole 28-pixel units");
}

// One encode of each real-size encoder (F16 weights, 2 threads): seconds and GFLOP/s. Run by
// hand: test_vision_encoder --gtest_also_run_disabled_tests --gtest_filter='*Timing*'.
TEST(VisionEncoderTiming, DISABLED_OneImageAtTheRealShapes) {
  tbb::task_arena arena(2);
  struct Shape {
    Family family;
    int32_t width, height;
  };
  for (const Shape s :
       {Shape{Family::LlavaMlp, 336, 336}, Shape{Family::Gemma3, 896, 896}, Shape{Family::Qwen25VL, 644, 476}}) {
    VisionSynthSpec spec;
    spec.config = find_vision_synth_preset(s.family, "full").config;
    spec.type = GgmlType::F16;
    const std::string path = test::scratch_path(family_file_name(s.family) + "-full.gguf");
    write_synth_projector(path, spec);
    const VisionModel model = load_projector(path);
    VisionEncoder encoder(model, arena);
    const PixelPlanes image = random_planes(s.width, s.height, 1);
    encode(encoder, {image});  // warm: weights paged in, scratch grown
    const auto start = std::chrono::steady_clock::now();
    const Encoded e = encode(encoder, {image});
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double flops = encoder.flops(s.width, s.height);
    std::printf("%-8s %dx%d: %d tokens, %.2f s, %.1f GFLOP, %.1f GFLOP/s\n", family_file_name(s.family).c_str(),
                s.width, s.height, e.tokens[0], seconds, flops / 1e9, flops / 1e9 / seconds);
    std::remove(path.c_str());
  }
}

}  // namespace
}  // namespace pagoda
