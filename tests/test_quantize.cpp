// Quantizers: byte-for-byte agreement with the files llama.cpp's llama-quantize wrote from the
// same F32 weights (../shared/models/llamacpp-quant), and round trips within ggml's known error.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "kernels/quant/dequantize.h"
#include "kernels/quant/quantize.h"
#include "pagoda/error.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

using kernels::QuantType;

std::vector<std::byte> quantize(QuantType type, std::span<const float> values) {
  const kernels::BlockShape block = kernels::block_shape(type);
  std::vector<std::byte> out(values.size() / size_t(block.elements) * size_t(block.bytes));
  kernels::quantize_row(type, values.data(), out.data(), int64_t(values.size()));
  return out;
}

// Every quantized tensor of `quantized` must be exactly what quantize_row makes of the same
// tensor in `original`. Returns the number of tensors compared.
int expect_same_bytes(const std::string& original_path, const std::string& quantized_path) {
  const GgufFile original = GgufFile::open(original_path);
  const GgufFile quantized = GgufFile::open(quantized_path);
  int compared = 0;
  for (const GgufTensorInfo& t : quantized.tensors()) {
    if (t.type == GgmlType::F32) continue;
    const GgufTensorInfo* source = original.find_tensor(t.name);
    EXPECT_NE(source, nullptr) << t.name;
    if (!source) continue;
    const std::vector<float> values = original.read_f32(*source);
    const std::vector<std::byte> mine = quantize(t.type, values);
    const std::span<const std::byte> theirs = quantized.tensor_bytes(t);
    EXPECT_EQ(mine.size(), theirs.size()) << t.name;
    if (mine.size() != theirs.size()) continue;
    const int block_bytes = kernels::block_shape(t.type).bytes;
    size_t differing_blocks = 0, first = SIZE_MAX;
    for (size_t b = 0; b < mine.size() / size_t(block_bytes); ++b) {
      if (std::memcmp(mine.data() + b * block_bytes, theirs.data() + b * block_bytes, size_t(block_bytes)) != 0) {
        ++differing_blocks;
        if (first == SIZE_MAX) first = b;
      }
    }
    EXPECT_EQ(differing_blocks, 0u) << quantized_path << ": " << t.name << " (" << ggml_type_name(t.type)
                                    << "): first differing block " << first;
    ++compared;
  }
  return compared;
}

class LlamaCppFiles : public ::testing::TestWithParam<std::string> {};

TEST_P(LlamaCppFiles, QuantizingTheF32ModelGivesLlamaQuantizesBytes) {
  const std::string model = GetParam();
  const std::string family = model.substr(0, 3);
  PAGODA_SHARED_OR_SKIP(original, "models/llamacpp-quant/" + family + "-F32.gguf");
  PAGODA_SHARED_OR_SKIP(quantized, "models/llamacpp-quant/" + model + ".gguf");
  EXPECT_GT(expect_same_bytes(original, quantized), 0);
}

INSTANTIATE_TEST_SUITE_P(Files, LlamaCppFiles,
                         ::testing::Values("l3v-Q8_0", "l3v-Q4_0", "l3v-Q4_1", "l3v-Q5_0", "l3v-Q5_1", "l3v-Q4_K_M",
                                           "l3v-Q5_K_M", "l3v-Q6_K", "q2v-Q8_0", "q2v-Q4_K_M", "l3v-Q2_K", "l3v-Q3_K_S",
                                           "l3v-Q3_K_M", "l3v-Q3_K_L", "l3v-IQ4_NL", "l3v-IQ4_XS"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

// ---- round trips -----------------------------------------------------------------------------

std::vector<float> round_trip(QuantType type, const std::vector<float>& values) {
  const std::vector<std::byte> q = quantize(type, values);
  std::vector<float> back(values.size());
  kernels::dequantize_row(type, q.data(), back.data(), int64_t(values.size()));
  return back;
}

constexpr QuantType kTypes[] = {QuantType::F16,  QuantType::BF16, QuantType::Q8_0,   QuantType::Q4_0,  QuantType::Q4_1,
                                QuantType::Q5_0, QuantType::Q5_1, QuantType::Q4_K,   QuantType::Q5_K,  QuantType::Q6_K,
                                QuantType::Q2_K, QuantType::Q3_K, QuantType::IQ4_NL, QuantType::IQ4_XS};

// ggml's own round-trip test (tests/test-quantize-fns.cpp): 4096 values 0.1 + 2·cos(i + offset),
// error sqrt(Σ(x − x̂)²) / n, at most 0.002 for every 4-bit-or-better type, 0.004 for Q3_K and
// 0.0075 for Q2_K.
TEST(QuantizeRoundTrip, WithinGgmlsKnownErrorOnItsTestData) {
  constexpr size_t n = 32 * 128;
  for (QuantType type : kTypes) {
    std::vector<float> x(n);
    for (size_t i = 0; i < n; ++i) x[i] = 0.1f + 2 * std::cos(float(i) + 0.0f);
    const std::vector<float> back = round_trip(type, x);
    double sum = 0.0;
    for (size_t i = 0; i < n; ++i) sum += (double(x[i]) - back[i]) * (double(x[i]) - back[i]);
    const double bound = type == QuantType::Q2_K ? 0.0075 : type == QuantType::Q3_K ? 0.004 : 0.002;
    EXPECT_LT(std::sqrt(sum) / n, bound) << ggml_type_name(type);
  }
}

// On Gaussian weights each type's relative RMS error sits near its known figure (about
// 2^-bits of the range per block, less for the K-quants' fitted scales): bounded here with
// some headroom, and ordered by bits.
TEST(QuantizeRoundTrip, GaussianWeightsKeepTheirTypesPrecision) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> x(256 * 64);
  for (float& v : x) v = normal(rng);
  double rms = 0.0;
  for (float v : x) rms += double(v) * v;
  rms = std::sqrt(rms / double(x.size()));
  auto relative_rmse = [&](QuantType type) {
    const std::vector<float> back = round_trip(type, x);
    double sum = 0.0;
    for (size_t i = 0; i < x.size(); ++i) sum += (double(x[i]) - back[i]) * (double(x[i]) - back[i]);
    return std::sqrt(sum / double(x.size())) / rms;
  };
  const struct {
    QuantType type;
    double bound;
  } bounds[] = {{QuantType::F16, 3e-4},  {QuantType::BF16, 3e-3}, {QuantType::Q8_0, 0.01},   {QuantType::Q6_K, 0.03},
                {QuantType::Q5_1, 0.05}, {QuantType::Q5_0, 0.06}, {QuantType::Q5_K, 0.05},   {QuantType::Q4_1, 0.10},
                {QuantType::Q4_0, 0.12}, {QuantType::Q4_K, 0.10}, {QuantType::IQ4_NL, 0.10}, {QuantType::IQ4_XS, 0.10},
                {QuantType::Q3_K, 0.20}, {QuantType::Q2_K, 0.40}};
  for (const auto& b : bounds) EXPECT_LT(relative_rmse(b.type), b.bound) << ggml_type_name(b.type);
  EXPECT_LT(relative_rmse(QuantType::Q8_0), relative_rmse(QuantType::Q6_K));
  EXPECT_LT(relative_rmse(QuantType::Q6_K), relative_rmse(QuantType::Q5_K));
  EXPECT_LT(relative_rmse(QuantType::Q5_K), relative_rmse(QuantType::Q4_K));
  EXPECT_LT(relative_rmse(QuantType::Q5_0), relative_rmse(QuantType::Q4_0));
  EXPECT_LT(relative_rmse(QuantType::Q5_1), relative_rmse(QuantType::Q4_1));
  EXPECT_LT(relative_rmse(QuantType::Q4_K), relative_rmse(QuantType::Q3_K));
  EXPECT_LT(relative_rmse(QuantType::Q3_K), relative_rmse(QuantType::Q2_K));
  // The non-linear grid fits Gaussian weights better than Q4_0's even steps.
  EXPECT_LT(relative_rmse(QuantType::IQ4_NL), relative_rmse(QuantType::Q4_0));
  for (QuantType t : {QuantType::Q2_K, QuantType::Q3_K, QuantType::IQ4_NL, QuantType::IQ4_XS})
    std::printf("%s: relative RMS error %.4f\n", ggml_type_name(t), relative_rmse(t));
}

// Per element: a 32-block type is off by at most half a step, plus the f16 rounding of the
// scale (at most 2^-11 relative, times the level).
TEST(QuantizeRoundTrip, Blocks32AreWithinHalfAStep) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uniform(-3.0f, 3.0f);
  std::vector<float> x(32 * 50);
  for (float& v : x) v = uniform(rng);
  const struct {
    QuantType type;
    int levels;  // steps across the block's range
    bool symmetric;
  } types[] = {{QuantType::Q8_0, 254, true},
               {QuantType::Q4_0, 16, true},
               {QuantType::Q5_0, 32, true},
               {QuantType::Q4_1, 15, false},
               {QuantType::Q5_1, 31, false}};
  for (const auto& t : types) {
    const std::vector<float> back = round_trip(t.type, x);
    for (size_t b = 0; b < x.size() / 32; ++b) {
      float lo = x[b * 32], hi = x[b * 32], amax = 0;
      for (size_t j = 0; j < 32; ++j) {
        lo = std::min(lo, x[b * 32 + j]), hi = std::max(hi, x[b * 32 + j]);
        amax = std::max(amax, std::abs(x[b * 32 + j]));
      }
      const float step = t.symmetric ? 2 * amax / float(t.levels) : (hi - lo) / float(t.levels);
      const float range = t.symmetric ? amax : std::max(std::abs(lo), std::abs(hi));
      for (size_t j = 0; j < 32; ++j) {
        const size_t i = b * 32 + j;
        // Q4_0 and Q5_0 have one level fewer on the side opposite the extreme value (−8..7
        // against a scale that maps the extreme to −8), so values near −extreme clamp to the
        // last level, up to one step away.
        const bool clamped = t.levels <= 32 && std::abs(x[i]) > (float(t.levels) / 2 - 1) * step;
        const float bound = (clamped ? step : 0.5f * step) + range * 0x1p-10f;
        EXPECT_LE(std::abs(back[i] - x[i]), bound) << ggml_type_name(t.type) << " " << i;
      }
    }
  }
}

TEST(QuantizeRoundTrip, ZerosStayZeros) {
  const std::vector<float> zeros(512, 0.0f);
  for (QuantType type : kTypes) {
    const std::vector<float> back = round_trip(type, zeros);
    for (float v : back) ASSERT_EQ(v, 0.0f) << ggml_type_name(type);
  }
}

TEST(QuantizeRow, RefusesPartialBlocksAndActivationOnlyTypes) {
  std::vector<float> x(300, 1.0f);
  std::vector<std::byte> out(4096);
  EXPECT_THROW(kernels::quantize_row(QuantType::Q4_K, x.data(), out.data(), 300), Error);
  EXPECT_THROW(kernels::quantize_row(QuantType::Q4_0, x.data(), out.data(), 33), Error);
  EXPECT_THROW(kernels::quantize_row(QuantType::Q2_K, x.data(), out.data(), 300), Error);
  EXPECT_THROW(kernels::quantize_row(QuantType::IQ4_NL, x.data(), out.data(), 40), Error);
  EXPECT_THROW(kernels::quantize_row(QuantType::Q8_K, x.data(), out.data(), 256), Error);
  EXPECT_FALSE(kernels::can_quantize(QuantType::Q8_K));
  EXPECT_TRUE(kernels::can_quantize(QuantType::Q6_K));
}

}  // namespace
}  // namespace pagoda
