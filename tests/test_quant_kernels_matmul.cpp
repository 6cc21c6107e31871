// WeightMatrix's matmul for every weight type and ISA: accuracy against dequantize-then-double
// references on awkward shapes, and the bitwise batch invariance the engine rests on.

#include <gtest/gtest.h>
#include <tbb/task_arena.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/quant/dequantize.h"
#include "kernels/quant/activations.h"
#include "kernels/quant/half_dot.h"
#include "kernels/quant/interleaved.h"
#include "kernels/quant/quantize.h"
#include "kernels/quant/weight_matrix.h"
#include "pagoda/error.h"
#include "support/kernel_support.h"

namespace {

using namespace pagoda::kernels;
using pagoda::test::random_normal;
using pagoda::test::supported_isas;

constexpr QuantType kTypes[] = {QuantType::F32,  QuantType::F16,    QuantType::BF16,  QuantType::Q8_0,
                                QuantType::Q4_0, QuantType::Q4_1,   QuantType::Q5_0,  QuantType::Q5_1,
                                QuantType::Q4_K, QuantType::Q5_K,   QuantType::Q6_K,  QuantType::Q2_K,
                                QuantType::Q3_K, QuantType::IQ4_NL, QuantType::IQ4_XS};

std::string name(QuantType t) { return ggml_type_id_name(uint32_t(t)); }

// A rows×cols matrix of random values encoded as `type`.
struct Encoded {
  QuantType type;
  int rows, cols;
  std::vector<uint8_t> bytes;
  std::vector<float> dequantized;
};
Encoded encode(QuantType type, int rows, int cols, unsigned seed) {
  const std::vector<float> values = random_normal(std::size_t(rows) * cols, seed);
  const BlockShape shape = block_shape(type);
  Encoded e{type, rows, cols, std::vector<uint8_t>(std::size_t(rows) * cols / shape.elements * shape.bytes),
            std::vector<float>(values.size())};
  quantize_row(type, values.data(), e.bytes.data(), int64_t(values.size()));
  dequantize_row(type, e.bytes.data(), e.dequantized.data(), int64_t(values.size()));
  return e;
}

WeightMatrix matrix_of(const Encoded& e, Isa isa) {
  const WeightPart part{e.type, e.bytes.data(), e.rows};
  return WeightMatrix::make({&part, 1}, e.cols, isa);
}

std::vector<float> run(const WeightMatrix& w, const std::vector<float>& a, int M, int threads) {
  std::vector<float> c(std::size_t(M) * w.rows(), NAN);
  tbb::task_arena arena(threads);
  arena.execute([&] { matmul(a.data(), M, w.cols(), w, c.data(), w.rows()); });
  return c;
}

// Error allowed relative to ‖w‖·‖a‖: fp32 rounding for the float types, plus the int8
// activation quantization for the quantized ones (≈ 3× the worst seen: 6e-8 for the float
// types, 1.9e-3 with Q8_0-like activations, 1.0e-3 with Q8_K ones).
double tolerance(QuantType t) {
  switch (t) {
    case QuantType::F32:
    case QuantType::F16:
    case QuantType::BF16: return 2e-7;
    case QuantType::Q2_K:
    case QuantType::Q3_K:
    case QuantType::Q4_K:
    case QuantType::Q5_K:
    case QuantType::Q6_K:
    case QuantType::IQ4_XS: return 3e-3;
    default: return 6e-3;
  }
}

TEST(WeightMatrix, MatchesDequantizedReference) {
  for (QuantType type : kTypes) {
    const bool k_quant = block_shape(type).elements == kQK_K;
    const std::vector<int> widths = k_quant ? std::vector<int>{256, 512, 768, 2816} : std::vector<int>{32, 96, 768};
    for (int cols : widths) {
      for (int rows : {1, 13}) {
        const Encoded w = encode(type, rows, cols, unsigned(cols + rows));
        const int M = 5;
        const std::vector<float> a = random_normal(std::size_t(M) * cols, 99);
        for (Isa isa : supported_isas()) {
          const std::vector<float> c = run(matrix_of(w, isa), a, M, 2);
          for (int m = 0; m < M; ++m)
            for (int n = 0; n < rows; ++n) {
              double want = 0, ww = 0, aa = 0;
              for (int k = 0; k < cols; ++k) {
                const double wk = w.dequantized[std::size_t(n) * cols + k], ak = a[std::size_t(m) * cols + k];
                want += wk * ak, ww += wk * wk, aa += ak * ak;
              }
              ASSERT_NEAR(c[std::size_t(m) * rows + n], want, tolerance(type) * std::sqrt(ww * aa))
                  << name(type) << " " << isa_name(isa) << " cols " << cols << " m " << m << " n " << n;
            }
        }
      }
    }
  }
}

// Each row's outputs alone (M = 1) are the bits it gets anywhere in any batch, with 1 or 2
// threads; quantized and half types also agree across ISAs.
TEST(WeightMatrix, BatchInvariant) {
  constexpr int kMaxRows = 130;
  for (QuantType type : kTypes) {
    const int cols = block_shape(type).elements == kQK_K ? 512 : 544;
    const Encoded w = encode(type, 37, cols, 7);
    const std::vector<float> a = random_normal(std::size_t(kMaxRows) * cols, 11);
    std::vector<float> first_isa_alone;
    for (Isa isa : supported_isas()) {
      const WeightMatrix matrix = matrix_of(w, isa);
      std::vector<float> alone(std::size_t(kMaxRows) * w.rows);
      for (int m = 0; m < kMaxRows; ++m) {
        const std::vector<float> row(a.begin() + std::size_t(m) * cols, a.begin() + std::size_t(m + 1) * cols);
        const std::vector<float> c = run(matrix, row, 1, 1);
        std::copy(c.begin(), c.end(), alone.begin() + std::size_t(m) * w.rows);
      }
      for (int M : {2, 3, 5, 17, 64, 130})
        for (int threads : {1, 2}) {
          // Rows in a rotated order, so each lands in other positions and tiles than alone.
          const int shift = M / 2;
          std::vector<float> batch(std::size_t(M) * cols);
          for (int i = 0; i < M; ++i) {
            const int m = (i + shift) % kMaxRows;
            std::memcpy(&batch[std::size_t(i) * cols], &a[std::size_t(m) * cols], cols * sizeof(float));
          }
          const std::vector<float> c = run(matrix, batch, M, threads);
          for (int i = 0; i < M; ++i) {
            const int m = (i + shift) % kMaxRows;
            ASSERT_EQ(std::memcmp(&c[std::size_t(i) * w.rows], &alone[std::size_t(m) * w.rows], w.rows * sizeof(float)),
                      0)
                << name(type) << " " << isa_name(isa) << " M " << M << " threads " << threads << " row " << m << " at "
                << i;
          }
        }
      if (type == QuantType::F32) continue;  // PackedMatrix's chain is per ISA
      if (first_isa_alone.empty()) first_isa_alone = alone;
      EXPECT_EQ(std::memcmp(alone.data(), first_isa_alone.data(), alone.size() * sizeof(float)), 0)
          << name(type) << " " << isa_name(isa) << " differs from portable";
    }
  }
}

// Parts of different types stacked by rows give each part's own outputs, and accumulate adds
// the whole dot product to C once.
TEST(WeightMatrix, FusedPartsAndAccumulate) {
  const int cols = 512, M = 3;
  const Encoded q = encode(QuantType::Q4_K, 10, cols, 1), k = encode(QuantType::Q6_K, 7, cols, 2),
                v = encode(QuantType::F32, 5, cols, 3);
  const std::vector<float> a = random_normal(std::size_t(M) * cols, 4);
  for (Isa isa : supported_isas()) {
    const WeightPart parts[] = {{q.type, q.bytes.data(), 10}, {k.type, k.bytes.data(), 7}, {v.type, v.bytes.data(), 5}};
    const WeightMatrix fused = WeightMatrix::make(parts, cols, isa);
    ASSERT_EQ(fused.rows(), 22);
    const std::vector<float> c = run(fused, a, M, 2);
    const std::vector<float> cq = run(matrix_of(q, isa), a, M, 2), ck = run(matrix_of(k, isa), a, M, 2),
                             cv = run(matrix_of(v, isa), a, M, 2);
    for (int m = 0; m < M; ++m) {
      EXPECT_EQ(std::memcmp(&c[m * 22], &cq[m * 10], 10 * 4), 0);
      EXPECT_EQ(std::memcmp(&c[m * 22 + 10], &ck[m * 7], 7 * 4), 0);
      EXPECT_EQ(std::memcmp(&c[m * 22 + 17], &cv[m * 5], 5 * 4), 0);
    }
    std::vector<float> acc(std::size_t(M) * 22, 0.5f);
    matmul_accumulate(a.data(), M, cols, fused, acc.data(), 22);
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < 17; ++n) EXPECT_EQ(acc[m * 22 + n], 0.5f + c[m * 22 + n]);
  }
}

// The half types' four-row kernels (decode's GEMV and the GEMM tiles) give each output the
// portable one-row dot product's bits, for every activation count and on rows with a partial
// 16-element tail.
TEST(WeightMatrix, HalfRowKernelsMatchOneRowDot) {
  using namespace pagoda::kernels::quant;
  if (!cpu_supports(Isa::Avx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  std::vector<std::pair<const DotKernels*, std::string>> tables = {{&dot_avx2, "avx2"}};
  if (cpu_supports(Isa::Avx512)) tables.push_back({&dot_avx512, "avx512"});
  for (QuantType type : {QuantType::F16, QuantType::BF16}) {
    for (int cols : {32, 40, 800}) {
      const Encoded w = encode(type, 4, cols, unsigned(cols));
      const std::size_t row_bytes = w.bytes.size() / 4, stride = cols * sizeof(float);
      const std::vector<float> a = random_normal(std::size_t(4) * cols, 5);
      const DotFn reference = dot_for(dot_portable, type).dot;
      for (const auto& [table, table_name] : tables) {
        const TypeKernels k = dot_for(*table, type);
        for (int na = 1; na <= 4; ++na) {
          float out[16];
          if (k.rows4) {
            k.rows4(w.bytes.data(), row_bytes, a.data(), stride, na, cols, out);
          } else {
            for (int r = 0; r < 4; ++r)
              for (int j = 0; j < na; ++j)
                out[4 * j + r] = k.dot(&w.bytes[r * row_bytes], &a[std::size_t(j) * cols], cols);
          }
          for (int j = 0; j < na; ++j)
            for (int r = 0; r < 4; ++r) {
              const float want = reference(&w.bytes[r * row_bytes], &a[std::size_t(j) * cols], cols);
              ASSERT_EQ(std::memcmp(&out[4 * j + r], &want, sizeof(float)), 0)
                  << name(type) << " " << table_name << " cols " << cols << " na " << na << " row " << r << " act "
                  << j;
            }
        }
      }
    }
  }
}

// Offsets of a block's f16 fields (scales, mins).
std::vector<int> half_fields(QuantType type) {
  switch (type) {
    case QuantType::Q4_1:
    case QuantType::Q5_1:
    case QuantType::Q4_K:
    case QuantType::Q5_K: return {0, 2};
    case QuantType::Q6_K: return {208};
    case QuantType::Q2_K: return {80, 82};
    case QuantType::Q3_K: return {108};
    default: return {0};
  }
}

// The interleaved kernels of every ISA this CPU can run — including AVX-512 without VNNI,
// which group_kernels() never picks on a VNNI machine — give each output the portable kernel's
// bits, for every activation count, on blocks of random bytes: every quant pattern (Q8_0's
// −128, the K-quants' largest scales and mins) against activations up to ±127.
TEST(WeightMatrix, GroupKernelsMatchPortableOnAnyBlock) {
  using namespace pagoda::kernels::quant;
  std::vector<std::pair<const GroupKernels*, std::string>> tables;
  if (cpu_supports(Isa::Avx2)) tables.push_back({&group_avx2, "avx2"});
  if (cpu_supports(Isa::Avx512)) tables.push_back({&group_avx512, "avx512"});
  if (cpu_supports(Isa::Avx512) && __builtin_cpu_supports("avx512vnni"))
    tables.push_back({&group_avx512vnni, "avx512vnni"});
  if (tables.empty()) GTEST_SKIP() << "no SIMD kernels on this CPU";
  std::mt19937 rng(17);
  for (QuantType type : kTypes) {
    if (!interleaved(type)) continue;
    const BlockShape shape = block_shape(type);
    const int cols = 3 * shape.elements, rows = 21;
    const std::size_t row_bytes = std::size_t(cols / shape.elements) * shape.bytes;
    std::vector<uint8_t> bytes(row_bytes * rows);
    for (uint8_t& b : bytes) b = uint8_t(rng());
    for (std::size_t block = 0; block < bytes.size() / shape.bytes; ++block)
      for (int field : half_fields(type)) bytes[block * shape.bytes + field + 1] &= 0xbb;  // finite halves below 1
    const HugePageMemory tiles = repack(type, bytes.data(), row_bytes, rows, cols);
    const std::size_t group_bytes = tile_bytes(type) * std::size_t(cols / shape.elements);
    const ActFormat format = act_format(type);
    const std::size_t stride = act_row_bytes(format, cols);
    std::vector<float> a = random_normal(std::size_t(4) * cols, 5);
    for (int k = 0; k < cols; ++k) a[k] = k % 3 ? 1.0f : -1.0f;  // row 0 quantizes to ±127
    std::vector<uint8_t> act(4 * stride);
    for (int j = 0; j < 4; ++j) quantize_act_row(format, &a[std::size_t(j) * cols], cols, &act[j * stride]);
    for (int g = 0; g < 2; ++g) {
      float want[16 * 4];
      group_for(group_portable, type)(tiles.get() + group_bytes * g, cols / shape.elements, act.data(), stride, 4, true,
                                      want);
      for (const auto& [table, table_name] : tables)
        for (int na = 1; na <= table->max_acts; ++na)
          for (int first = 0; first + na <= 4; ++first) {
            float out[16 * 4];
            group_for(*table, type)(tiles.get() + group_bytes * g, cols / shape.elements, &act[first * stride], stride,
                                    na, first == 0, out);
            for (int j = 0; j < na; ++j)
              for (int r = 0; r < kGroupRows; ++r)
                ASSERT_EQ(std::memcmp(&out[16 * j + r], &want[16 * (first + j) + r], sizeof(float)), 0)
                    << name(type) << " " << table_name << " group " << g << " na " << na << " act " << first + j
                    << " row " << r << ": " << out[16 * j + r] << " vs " << want[16 * (first + j) + r];
          }
    }
  }
}

TEST(WeightMatrix, RefusesBadShapesAndTypes) {
  std::vector<uint8_t> bytes(4096);
  const WeightPart q4k{QuantType::Q4_K, bytes.data(), 1};
  EXPECT_THROW(WeightMatrix::make({&q4k, 1}, 96), pagoda::Error);
  const WeightPart q8k{QuantType::Q8_K, bytes.data(), 1};
  EXPECT_THROW(WeightMatrix::make({&q8k, 1}, 256), pagoda::Error);
  const WeightPart iq{static_cast<QuantType>(16), bytes.data(), 1};
  EXPECT_THROW(WeightMatrix::make({&iq, 1}, 256), pagoda::Error);
}

}  // namespace

namespace {

using namespace pagoda::kernels::quant;

TEST(ActivationQuantizer, TheAvx512CodeWritesThePortableBytes) {
  if (!cpu_supports(Isa::Avx512)) GTEST_SKIP() << "this CPU has no AVX-512";
  const int cols = 32 * 40;
  std::vector<float> x = random_normal(std::size_t(cols), 17);
  // Block 1: exact ties (max 127, so d = 1 and every value is its own quotient), both signs.
  const float ties[] = {127.0f, 0.5f, -0.5f, 1.5f, -1.5f, 2.5f, -2.5f, 126.5f, -126.5f, 0.49999997f, -0.49999997f};
  for (int j = 0; j < 32; ++j) x[32 + j] = ties[j % 11];
  for (int j = 0; j < 32; ++j) x[64 + j] = 0.0f;                         // block 2: all zero (d = 0)
  for (int j = 0; j < 32; ++j) x[96 + j] = j % 2 ? -1e-40f : 3e-39f;     // block 3: subnormals
  for (int j = 0; j < 32; ++j) x[128 + j] = j == 5 ? -3e38f : 1e30f;     // block 4: huge
  for (int j = 0; j < 32; ++j) x[160 + j] = j % 4 == 0 ? -0.0f : 1e-3f;  // block 5: negative zeros
  for (int j = 0; j < 32; ++j) x[192 + j] = j % 3 ? 2e-38f : -1e-38f;    // block 6: 1/d overflows
  for (int j = 0; j < 32; ++j)  // block 7: NaN and infinities among ordinary values
    x[224 + j] = j == 3 ? NAN : j == 9 ? INFINITY : j == 10 ? -INFINITY : float(j) - 16.0f;
  for (int b = 8; b < 40; ++b)  // the rest: blocks of every scale
    for (int j = 0; j < 32; ++j) x[32 * b + j] *= std::ldexp(1.0f, (b * 7) % 60 - 30);
  const std::size_t bytes = act_row_bytes(ActFormat::Q8_32, cols);
  std::vector<uint8_t> portable(bytes), avx512(bytes);
  quantize_act_row(ActFormat::Q8_32, x.data(), cols, portable.data(), Isa::Portable);
  quantize_act_row(ActFormat::Q8_32, x.data(), cols, avx512.data(), Isa::Avx512);
  for (std::size_t b = 0; b < bytes / sizeof(ActBlock32); ++b)
    ASSERT_EQ(std::memcmp(&portable[b * sizeof(ActBlock32)], &avx512[b * sizeof(ActBlock32)], sizeof(ActBlock32)), 0)
        << "block " << b;
}

}  // namespace
