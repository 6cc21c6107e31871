// Portable halves of lora_sgmv in plain C++ (no contraction: the library builds with
// -ffp-contract=off). Shrink: each dot product in 8 partial sums (k mod 8), summed pairwise.
// Expand: 16 output columns at a time, each a chain over the rank in order.

#include <algorithm>
#include <cstddef>

#include "kernels/lora_sgmv_impl.h"

namespace pagoda::kernels::detail {

namespace {

constexpr int kLanes = 8;
constexpr int kCols = 16;

float dot(const float* x, const float* a, int n) {
  float s[kLanes] = {};
  int k = 0;
  for (; k + kLanes <= n; k += kLanes)
    for (int l = 0; l < kLanes; ++l) s[l] = s[l] + x[k + l] * a[k + l];
  for (int l = 0; k + l < n; ++l) s[l] = s[l] + x[k + l] * a[k + l];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

void shrink(const float* const* x, int rows, const float* a, int rank, int n_in, float* t, int ldt) {
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < rank; ++j) t[std::size_t(i) * ldt + j] = dot(x[i], a + std::size_t(j) * n_in, n_in);
}

void expand(const float* t, int ldt, int rows, const float* b_t, int rank, int n_out, float* const* y) {
  for (int i = 0; i < rows; ++i) {
    const float* ti = t + std::size_t(i) * ldt;
    float* yi = y[i];
    for (int n0 = 0; n0 < n_out; n0 += kCols) {
      const int cols = std::min(kCols, n_out - n0);
      float acc[kCols] = {};
      for (int j = 0; j < rank; ++j) {
        const float* b = b_t + std::size_t(j) * n_out + n0;
        for (int c = 0; c < cols; ++c) acc[c] = acc[c] + ti[j] * b[c];
      }
      for (int c = 0; c < cols; ++c) yi[n0 + c] = yi[n0 + c] + acc[c];
    }
  }
}

}  // namespace

const LoraKernels lora_portable = {&shrink, &expand};

}  // namespace pagoda::kernels::detail
