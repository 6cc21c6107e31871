#include "kernels/quant/half_dot.h"

namespace pagoda::kernels::quant {

const DotKernels& dot_kernels(Isa isa) {
  switch (isa) {
    case Isa::Portable: return dot_portable;
    case Isa::Avx2: return dot_avx2;
    case Isa::Avx512: return dot_avx512;
  }
  return dot_portable;
}

TypeKernels dot_for(const DotKernels& k, QuantType type) {
  switch (type) {
    case QuantType::F16: return k.f16;
    case QuantType::BF16: return k.bf16;
    default: return {};
  }
}

}  // namespace pagoda::kernels::quant
