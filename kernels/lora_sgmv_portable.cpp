// Portable halves of lora_sgmv in plain C++ (no contraction: the library builds with
// -ffp-contract=off). Shrink: each dot product in 8 partial sums (k mod 8), summed pairwise,
// then scaled. Expand: 16 output columns at a time, each a chain over the rank in order.

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/half.h"
#include "kernels/lora_sgmv_impl.h"

namespace pagoda::kernels::detail {

namespace {

constexpr int kLanes = 8;
constexpr int kCols = 16;

// Element i of a factor stored as E, widened exactly.
template <LoraElement E>
float element(const void* p, std::size_t i) {
  if constexpr (E == LoraElement::F32) return static_cast<const float*>(p)[i];
  if constexpr (E == LoraElement::F16) return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
  if constexpr (E == LoraElement::BF16) return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
}

template <LoraElement E>
float dot(const float* x, const void* a, std::size_t a0, int n) {
  float s[kLanes] = {};
  int k = 0;
  for (; k + kLanes <= n; k += kLanes)
    for (int l = 0; l < kLanes; ++l) s[l] = s[l] + x[k + l] * element<E>(a, a0 + std::size_t(k + l));
  for (int l = 0; k + l < n; ++l) s[l] = s[l] + x[k + l] * element<E>(a, a0 + std::size_t(k + l));
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

template <LoraElement E>
void shrink(const float* const* x, int rows, const void* a, int rank, int n_in, float scale, float* t, int ldt,
            LoraPrefetch&) {
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < rank; ++j) t[std::size_t(i) * ldt + j] = dot<E>(x[i], a, std::size_t(j) * n_in, n_in) * scale;
}

template <LoraElement E>
void expand(const float* t, int ldt, int rows, const void* b_t, int rank, int n_out, float* const* y, LoraPrefetch&) {
  for (int i = 0; i < rows; ++i) {
    const float* ti = t + std::size_t(i) * ldt;
    float* yi = y[i];
    for (int n0 = 0; n0 < n_out; n0 += kCols) {
      const int cols = std::min(kCols, n_out - n0);
      float acc[kCols] = {};
      for (int j = 0; j < rank; ++j) {
        const std::size_t b = std::size_t(j) * n_out + n0;
        for (int c = 0; c < cols; ++c) acc[c] = acc[c] + ti[j] * element<E>(b_t, b + c);
      }
      for (int c = 0; c < cols; ++c) yi[n0 + c] = yi[n0 + c] + acc[c];
    }
  }
}

}  // namespace

const LoraKernels lora_portable = {{&shrink<LoraElement::F32>, &shrink<LoraElement::F16>, &shrink<LoraElement::BF16>},
                                   {&expand<LoraElement::F32>, &expand<LoraElement::F16>, &expand<LoraElement::BF16>}};

}  // namespace pagoda::kernels::detail
