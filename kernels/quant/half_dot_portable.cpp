// Portable dot products: the reference statement of the lane arithmetic in half_dot.h, which
// the AVX2 and AVX-512 kernels reproduce bit for bit.

#include <cmath>
#include <cstring>

#include "kernels/half.h"
#include "kernels/quant/half_dot.h"

namespace pagoda::kernels::quant {

namespace {

template <bool kBf16>
float dot_half(const void* w, const void* act, int cols) {
  const auto* h = static_cast<const uint8_t*>(w);
  const auto* a = static_cast<const float*>(act);
  float acc[16] = {};
  const int padded = (cols + 15) / 16 * 16;
  for (int k = 0; k < padded; ++k) {
    float wk = 0.0f, ak = 0.0f;
    if (k < cols) {
      uint16_t bits;
      std::memcpy(&bits, h + 2 * k, 2);
      wk = kBf16 ? bf16_to_f32(bits) : f16_to_f32(bits);
      ak = a[k];
    }
    acc[k % 16] =
        std::fma(ak, wk, acc[k % 16]);  // one rounding, as vfmadd (glibc runs that instruction where the CPU has it)
  }
  float half[8];
  for (int l = 0; l < 8; ++l) half[l] = acc[l] + acc[l + 8];
  return reduce8(half);
}

// Four rows are four one-row dot products.
template <DotFn F>
constexpr TypeKernels rows() {
  return {F, [](const void* w, const void* act, std::size_t stride, int cols, float* out) {
            for (int r = 0; r < 4; ++r) out[r] = F(w, static_cast<const uint8_t*>(act) + stride * r, cols);
          }};
}

}  // namespace

extern const DotKernels dot_portable = {rows<dot_half<false>>(), rows<dot_half<true>>()};

}  // namespace pagoda::kernels::quant
