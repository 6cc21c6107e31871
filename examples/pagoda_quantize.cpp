// pagoda-quantize: quantizes a GGUF model as llama.cpp's llama-quantize does (same per-tensor
// types, same reference rounding, so the same bytes for the same F32 weights).
//   pagoda-quantize model-f32.gguf model-q4_k_m.gguf q4_k_m

#include <cstdio>
#include <iostream>
#include <string>

#include "engine/gguf/quantize_gguf.h"

namespace {

constexpr const char* kUsage = R"(usage: pagoda-quantize IN.gguf OUT.gguf TYPE
  TYPE: f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k_m, q5_k_m, q6_k, q2_k, q3_k_s,
        q3_k_m, q3_k_l, iq4_nl or iq4_xs (llama-quantize's presets: the mixtures and every
        quantized preset keep some tensors at other types)
Matrices are quantized; norms, biases and rope_freqs stay as they are. A matrix whose rows do
not fit its type's blocks falls back as llama.cpp's does (Q4_K -> Q5_0, Q5_K -> Q5_1,
Q6_K -> Q8_0, Q2_K and Q3_K -> Q4_0, IQ4_XS -> IQ4_NL, then F16), and the tool says which.
)";

std::string shape_text(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && (std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help")) {
    std::cout << kUsage;
    return 0;
  }
  if (argc != 4) {
    std::fprintf(stderr, "%s", kUsage);
    return 2;
  }
  try {
    const pagoda::QuantPreset preset = pagoda::parse_quant_preset(argv[3]);
    const pagoda::QuantizeReport report = pagoda::quantize_gguf(argv[1], argv[2], preset);
    int fallbacks = 0;
    for (size_t i = 0; i < report.tensors.size(); ++i) {
      const pagoda::QuantizedTensor& t = report.tensors[i];
      std::printf("[%3zu/%3zu] %-32s %-14s %5s -> %s\n", i + 1, report.tensors.size(), t.name.c_str(),
                  shape_text(t.shape).c_str(), pagoda::ggml_type_name(t.from), pagoda::ggml_type_name(t.to.type));
      if (t.to.fell_back()) {
        ++fallbacks;
        std::printf("          fallback: rows of %llu do not fit %s's blocks of %d; using %s\n",
                    static_cast<unsigned long long>(t.shape[0]), pagoda::ggml_type_name(t.to.wanted),
                    pagoda::kernels::block_shape(t.to.wanted).elements, pagoda::ggml_type_name(t.to.type));
      }
    }
    std::printf("%s: %.2f MiB -> %.2f MiB (%s)", argv[2], double(report.bytes_in) / (1 << 20),
                double(report.bytes_out) / (1 << 20), pagoda::quant_preset_name(preset));
    if (fallbacks) std::printf(", %d tensor(s) fell back", fallbacks);
    std::printf("\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pagoda-quantize: %s\n", e.what());
    return 1;
  }
}
