// Quantizers: byte-for-byte agreement with the files llama.cpp's llama-quantize wrote from the
// same F32 weights (../shared/models/llamacpp-quant), and round trips within ggml's known error.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
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
                                           "l3v-Q5_K_M", "l3v-Q6_K", "q2v-Q8_0", "q2v-Q4_K_M"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

}  // namespace
}  // namespace pagoda
