// ggml's reference dequantization: hand-built blocks whose values are known from the layout,
// and llama.cpp's own quantized files checked against the F32 model they were made from.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "kernels/quant/dequantize.h"
#include "pagoda/error.h"
#include "support/test_support.h"

namespace {

using namespace pagoda::kernels;

constexpr uint16_t kHalfQuarter = 0x3400;   // 0.25
constexpr uint16_t kHalfHalf = 0x3800;      // 0.5
constexpr uint16_t kHalfOne = 0x3c00;       // 1
constexpr uint16_t kHalfTwo = 0x4000;       // 2
constexpr uint16_t kHalfMinusOne = 0xbc00;  // -1

// 4-bit q for the 32-element types: element j < 16 in the low nibble of byte j, j + 16 high.
int q4_of(int j) { return (j * 7 + 3) % 16; }
// Whether element j of a Q5 block has its fifth bit set.
bool q5_bit(int j) { return (j % 3) == 1; }

template <typename Block>
void fill_q4(Block& b) {
  for (int j = 0; j < 16; ++j) b.qs[j] = uint8_t(q4_of(j) | (q4_of(j + 16) << 4));
}
template <typename Block>
void fill_q5_high(Block& b) {
  uint32_t qh = 0;
  for (int j = 0; j < 32; ++j)
    if (q5_bit(j)) qh |= 1u << j;
  std::memcpy(b.qh, &qh, 4);
}

std::vector<float> decode(QuantType type, const void* block, int n) {
  std::vector<float> out(n);
  dequantize_row(type, block, out.data(), n);
  return out;
}

TEST(Dequantize, Q4_0) {
  BlockQ4_0 b{};
  b.d = kHalfHalf;
  fill_q4(b);
  const std::vector<float> y = decode(QuantType::Q4_0, &b, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.5f * float(q4_of(j) - 8)) << j;
}

TEST(Dequantize, Q4_1) {
  BlockQ4_1 b{};
  b.d = kHalfQuarter;
  b.m = kHalfMinusOne;
  fill_q4(b);
  const std::vector<float> y = decode(QuantType::Q4_1, &b, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.25f * float(q4_of(j)) - 1.0f) << j;
}

TEST(Dequantize, Q5_0) {
  BlockQ5_0 b{};
  b.d = kHalfTwo;
  fill_q4(b);
  fill_q5_high(b);
  const std::vector<float> y = decode(QuantType::Q5_0, &b, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 2.0f * float(q4_of(j) + (q5_bit(j) ? 16 : 0) - 16)) << j;
}

TEST(Dequantize, Q5_1) {
  BlockQ5_1 b{};
  b.d = kHalfHalf;
  b.m = kHalfOne;
  fill_q4(b);
  fill_q5_high(b);
  const std::vector<float> y = decode(QuantType::Q5_1, &b, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.5f * float(q4_of(j) + (q5_bit(j) ? 16 : 0)) + 1.0f) << j;
}

TEST(Dequantize, Q8_0TwoBlocks) {
  BlockQ8_0 b[2]{};
  b[0].d = kHalfTwo;
  b[1].d = kHalfMinusOne;
  for (int j = 0; j < 32; ++j) b[0].qs[j] = b[1].qs[j] = int8_t(j * 8 - 128);
  const std::vector<float> y = decode(QuantType::Q8_0, b, 64);
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(y[j], 2.0f * float(j * 8 - 128));
    EXPECT_EQ(y[32 + j], -float(j * 8 - 128));
  }
}

// K-quant sub-block scales and mins, 6 bits each, all bit positions exercised.
constexpr uint8_t kScales[8] = {1, 2, 63, 17, 33, 48, 5, 60};
constexpr uint8_t kMins[8] = {0, 3, 9, 63, 40, 21, 1, 50};

// Packs 8 six-bit scales and mins as Q4_K / Q5_K store them (ggml_blocks.h).
void pack_k_scales(uint8_t out[12]) {
  for (int j = 0; j < 4; ++j) {
    out[j] = uint8_t((kScales[j] & 63) | ((kScales[j + 4] >> 4) << 6));
    out[j + 4] = uint8_t((kMins[j] & 63) | ((kMins[j + 4] >> 4) << 6));
    out[j + 8] = uint8_t((kScales[j + 4] & 15) | ((kMins[j + 4] & 15) << 4));
  }
}

// q of element e (0..255) in the K-quant tests.
int k_q4(int e) { return (e * 5 + 1) % 16; }
bool k_q5_bit(int e) { return (e % 5) == 2; }

// A Q4_K / Q5_K block with scales d and dmin, the test's sub-block scales and mins, and the
// low four bits k_q4 of each element in qs: each 32 bytes hold sub-blocks 2i (low nibbles) and
// 2i + 1 (high nibbles).
template <typename Block>
Block k_block(uint16_t d, uint16_t dmin) {
  Block b{};
  b.d = d;
  b.dmin = dmin;
  pack_k_scales(b.scales);
  for (int i = 0; i < 4; ++i)
    for (int l = 0; l < 32; ++l) b.qs[32 * i + l] = uint8_t(k_q4(64 * i + l) | (k_q4(64 * i + 32 + l) << 4));
  return b;
}

TEST(Dequantize, Q4_K) {
  const BlockQ4_K b = k_block<BlockQ4_K>(kHalfOne, kHalfHalf);
  const std::vector<float> y = decode(QuantType::Q4_K, &b, 256);
  for (int e = 0; e < 256; ++e)
    EXPECT_EQ(y[e], float(kScales[e / 32]) * float(k_q4(e)) - 0.5f * float(kMins[e / 32])) << e;
}

TEST(Dequantize, Q5_K) {
  BlockQ5_K b = k_block<BlockQ5_K>(kHalfQuarter, kHalfOne);
  // Sub-block s's fifth bit of element l is bit s of qh[l].
  for (int e = 0; e < 256; ++e)
    if (k_q5_bit(e)) b.qh[e % 32] |= uint8_t(1 << (e / 32));
  const std::vector<float> y = decode(QuantType::Q5_K, &b, 256);
  for (int e = 0; e < 256; ++e) {
    const int q = k_q4(e) + (k_q5_bit(e) ? 16 : 0);
    EXPECT_EQ(y[e], 0.25f * float(kScales[e / 32]) * float(q) - float(kMins[e / 32])) << e;
  }
}

TEST(Dequantize, Q6_K) {
  BlockQ6_K b{};
  b.d = kHalfHalf;
  for (int s = 0; s < 16; ++s) b.scales[s] = int8_t(s * 17 - 128);
  auto q6 = [](int e) { return (e * 11 + 7) % 64; };
  // Each 128-value half: group g of 32 takes a nibble of ql (g & 1 picks the second 32 bytes,
  // g & 2 the high nibble) and bits 2g, 2g + 1 of qh.
  for (int e = 0; e < 256; ++e) {
    const int half = e / 128, g = (e % 128) / 32, l = e % 32;
    const int ql_at = 64 * half + l + 32 * (g & 1);
    b.ql[ql_at] |= uint8_t((q6(e) & 15) << (g & 2 ? 4 : 0));
    b.qh[32 * half + l] |= uint8_t((q6(e) >> 4) << (2 * g));
  }
  const std::vector<float> y = decode(QuantType::Q6_K, &b, 256);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 0.5f * float(b.scales[e / 16]) * float(q6(e) - 32)) << e;
}

TEST(Dequantize, HalfAndBfloat) {
  const uint16_t halves[] = {0x0000, 0x8000, 0x0001, 0x3c00, 0xc000, 0x7bff, 0x7c00, 0x03ff};
  const float want[] = {0.0f, -0.0f, 0x1p-24f, 1.0f, -2.0f, 65504.0f, INFINITY, 1023 * 0x1p-24f};
  const std::vector<float> y = decode(QuantType::F16, halves, 8);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(std::memcmp(&y[i], &want[i], 4), 0) << i;
  const uint16_t bf[] = {0x3f80, 0xc0a0, 0x0001};
  const std::vector<float> z = decode(QuantType::BF16, bf, 3);
  EXPECT_EQ(z[0], 1.0f);
  EXPECT_EQ(z[1], -5.0f);
  EXPECT_EQ(z[2], std::bit_cast<float>(uint32_t(0x00010000)));
}

TEST(Dequantize, IQ4_NL) {
  BlockIQ4_NL b{};
  b.d = kHalfHalf;
  fill_q4(b);
  const std::vector<float> y = decode(QuantType::IQ4_NL, &b, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.5f * float(kIq4nlValues[q4_of(j)])) << j;
}

// Q2_K / Q3_K qs: element k's 2 low bits are bits 2c, 2c + 1 of byte 32·half + l, with
// half = k / 128, c = (k % 128) / 32, l = k % 32.
int q2_of(const uint8_t* qs, int k) { return (qs[32 * (k / 128) + k % 32] >> (2 * ((k % 128) / 32))) & 3; }

TEST(Dequantize, Q2_K) {
  BlockQ2_K b{};
  b.d = kHalfHalf;
  b.dmin = kHalfOne;
  for (int j = 0; j < 16; ++j) b.scales[j] = uint8_t((j * 7 + 1) % 16 | ((15 - j) << 4));
  for (int i = 0; i < 64; ++i) b.qs[i] = uint8_t(i * 37 + 11);
  const std::vector<float> y = decode(QuantType::Q2_K, &b, 256);
  for (int k = 0; k < 256; ++k) {
    const int sc = b.scales[k / 16];
    EXPECT_EQ(y[k], 0.5f * float(sc & 15) * float(q2_of(b.qs, k)) - float(sc >> 4)) << k;
  }
}

TEST(Dequantize, Q3_K) {
  BlockQ3_K b{};
  b.d = kHalfQuarter;
  int scale[16];  // 6 bits: low nibbles in bytes 0–7 (j < 8 low, j ≥ 8 high), top 2 bits in 8–11
  for (int j = 0; j < 16; ++j) {
    scale[j] = (j * 5 + 3) % 64;
    b.scales[j % 8] |= uint8_t((scale[j] & 15) << (j < 8 ? 0 : 4));
    b.scales[8 + j % 4] |= uint8_t((scale[j] >> 4) << (2 * (j / 4)));
  }
  for (int i = 0; i < 64; ++i) b.qs[i] = uint8_t(i * 53 + 7);
  for (int i = 0; i < 32; ++i) b.hmask[i] = uint8_t(i * 29 + 5);
  const std::vector<float> y = decode(QuantType::Q3_K, &b, 256);
  for (int k = 0; k < 256; ++k) {
    const int high = (b.hmask[k % 32] >> (k / 32)) & 1;  // bit k / 32 of hmask[k % 32]
    EXPECT_EQ(y[k], 0.25f * float(scale[k / 16] - 32) * float(q2_of(b.qs, k) + 4 * high - 4)) << k;
  }
}

TEST(Dequantize, IQ4_XS) {
  BlockIQ4_XS b{};
  b.d = kHalfHalf;
  int scale[8];  // 6 bits: nibble j % 2 of scales_l[j / 2], bits 2j, 2j + 1 of scales_h on top
  for (int j = 0; j < 8; ++j) {
    scale[j] = (j * 9 + 5) % 64;
    b.scales_l[j / 2] |= uint8_t((scale[j] & 15) << (4 * (j % 2)));
    b.scales_h = uint16_t(b.scales_h | (scale[j] >> 4) << (2 * j));
  }
  for (int i = 0; i < 128; ++i) b.qs[i] = uint8_t(i * 71 + 13);
  const std::vector<float> y = decode(QuantType::IQ4_XS, &b, 256);
  for (int k = 0; k < 256; ++k) {
    const uint8_t byte = b.qs[16 * (k / 32) + k % 16];  // as IQ4_NL within each 32
    const int q = k % 32 < 16 ? byte & 15 : byte >> 4;
    EXPECT_EQ(y[k], 0.5f * float(scale[k / 32] - 32) * float(kIq4nlValues[q])) << k;
  }
}

TEST(Dequantize, RefusesPartialBlocksAndActivationTypes) {
  BlockQ4_K b{};
  EXPECT_THROW(dequantize_row(QuantType::Q4_K, &b, nullptr, 100), pagoda::Error);
  EXPECT_THROW(dequantize_row(QuantType::Q8_K, &b, nullptr, 256), pagoda::Error);
  EXPECT_THROW(dequantize_row(static_cast<QuantType>(16), &b, nullptr, 256), pagoda::Error);
}

// llama-quantize's files of the same random model: every dequantized matrix must lie within
// its type's quantization error of the F32 original (RMS error relative to the tensor's RMS;
// Q8_0 also element by element: at most half a step, plus its f16 scale's rounding).
TEST(Dequantize, MatchesLlamaQuantizeOutputs) {
  PAGODA_SHARED_OR_SKIP(f32_path, "models/llamacpp-quant/l3v-F32.gguf");
  const pagoda::GgufFile reference = pagoda::GgufFile::open(f32_path);
  const struct {
    const char* file;
    double max_relative_rms;
  } files[] = {{"Q8_0", 0.01}, {"Q6_K", 0.03},   {"Q5_K_M", 0.06}, {"Q5_0", 0.06},
               {"Q5_1", 0.06}, {"Q4_K_M", 0.12}, {"Q4_0", 0.12},   {"Q4_1", 0.12}};
  for (const auto& f : files) {
    const std::string path = pagoda::test::shared_file(std::string("models/llamacpp-quant/l3v-") + f.file + ".gguf");
    ASSERT_FALSE(path.empty());
    const pagoda::GgufFile quantized = pagoda::GgufFile::open(path);
    int checked = 0;
    for (const pagoda::GgufTensorInfo& t : quantized.tensors()) {
      if (t.type == QuantType::F32) continue;
      const pagoda::GgufTensorInfo* original = reference.find_tensor(t.name);
      ASSERT_NE(original, nullptr) << t.name;
      const std::vector<float> want = reference.read_f32(*original);
      const std::vector<float> got = quantized.read_f32(t);
      ASSERT_EQ(got.size(), want.size());
      double err2 = 0, ref2 = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        err2 += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
        ref2 += double(want[i]) * want[i];
      }
      const double relative_rms = std::sqrt(err2 / ref2);
      EXPECT_LT(relative_rms, t.type == QuantType::Q6_K ? 0.03 : f.max_relative_rms) << f.file << " " << t.name;
      if (t.type == QuantType::Q8_0) {
        for (size_t b = 0; b < got.size() / 32; ++b) {
          float amax = 0;
          for (int j = 0; j < 32; ++j) amax = std::max(amax, std::abs(want[32 * b + j]));
          for (int j = 0; j < 32; ++j)
            ASSERT_LE(std::abs(got[32 * b + j] - want[32 * b + j]), amax / 127 * (0.5 + 128 * 0x1p-11) + 1e-12)
                << t.name << " " << 32 * b + j;
        }
      }
      ++checked;
    }
    EXPECT_GT(checked, 0) << f.file;
  }
}

}  // namespace
