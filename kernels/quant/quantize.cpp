#include "kernels/quant/quantize.h"

#include <cstring>
#include <string>

#include "kernels/half.h"
#include "kernels/quant/quantize_impl.h"
#include "pagoda/error.h"

namespace pagoda::kernels {

bool can_quantize(QuantType type) {
  switch (type) {
    case QuantType::F32:
    case QuantType::F16:
    case QuantType::BF16:
    case QuantType::Q4_0:
    case QuantType::Q4_1:
    case QuantType::Q5_0:
    case QuantType::Q5_1:
    case QuantType::Q8_0:
    case QuantType::Q8_1:
    case QuantType::Q2_K:
    case QuantType::Q3_K:
    case QuantType::Q4_K:
    case QuantType::Q5_K:
    case QuantType::Q6_K:
    case QuantType::IQ4_NL:
    case QuantType::IQ4_XS: return true;
    case QuantType::Q8_K: return false;
  }
  return false;
}

void quantize_row(QuantType type, const float* src, void* dst, int64_t n) {
  const char* name = ggml_type_id_name(uint32_t(type));
  if (!can_quantize(type)) {
    throw Error(std::string("quantize_row: cannot write ") + (name ? name : std::to_string(uint32_t(type)).c_str()));
  }
  const BlockShape block = block_shape(type);
  if (n < 0 || n % block.elements != 0) {
    throw Error(std::string("quantize_row: ") + name + " needs a multiple of " + std::to_string(block.elements) +
                " values, not " + std::to_string(n));
  }
  const int64_t blocks = n / block.elements;
  using namespace quantize_detail;
  switch (type) {
    case QuantType::F32:
      if (n > 0) std::memcpy(dst, src, size_t(n) * sizeof(float));
      return;
    case QuantType::F16: {
      auto* out = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) out[i] = f32_to_f16(src[i]);
      return;
    }
    case QuantType::BF16: {
      auto* out = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) out[i] = f32_to_bf16(src[i]);
      return;
    }
    case QuantType::Q4_0: return quantize_blocks32(src, static_cast<BlockQ4_0*>(dst), blocks);
    case QuantType::Q4_1: return quantize_blocks32(src, static_cast<BlockQ4_1*>(dst), blocks);
    case QuantType::Q5_0: return quantize_blocks32(src, static_cast<BlockQ5_0*>(dst), blocks);
    case QuantType::Q5_1: return quantize_blocks32(src, static_cast<BlockQ5_1*>(dst), blocks);
    case QuantType::Q8_0: return quantize_q8_0(src, static_cast<BlockQ8_0*>(dst), blocks);
    case QuantType::Q8_1: return quantize_q8_1(src, static_cast<BlockQ8_1*>(dst), blocks);
    case QuantType::IQ4_NL: return quantize_iq4_nl(src, static_cast<BlockIQ4_NL*>(dst), blocks);
    case QuantType::Q2_K: return quantize_q2_k(src, static_cast<BlockQ2_K*>(dst), blocks);
    case QuantType::Q3_K: return quantize_q3_k(src, static_cast<BlockQ3_K*>(dst), blocks);
    case QuantType::IQ4_XS: return quantize_iq4_xs(src, static_cast<BlockIQ4_XS*>(dst), blocks);
    case QuantType::Q4_K: return quantize_q4_k(src, static_cast<BlockQ4_K*>(dst), blocks);
    case QuantType::Q5_K: return quantize_q5_k(src, static_cast<BlockQ5_K*>(dst), blocks);
    case QuantType::Q6_K: return quantize_q6_k(src, static_cast<BlockQ6_K*>(dst), blocks);
    case QuantType::Q8_K: break;
  }
}

}  // namespace pagoda::kernels
