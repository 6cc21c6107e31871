#pragma once
// Internal: the per-ISA halves of lora_sgmv, for a group of up to kLoraGroupRows rows that
// share one adapter (so they share every load of its factors), one version per element type
// of the factors (indexed by LoraElement). Each *_avx512/_avx2/_portable translation unit
// defines one table. Whatever the group's size, every output's arithmetic is that of the row
// alone: the grouping only shares loads. Widening 16-bit factors is exact, so a factor's
// element type changes what is read, never the arithmetic on the values read.

#include "kernels/lora_sgmv.h"

namespace pagoda::kernels::detail {

inline constexpr int kLoraGroupRows = 4;
inline constexpr int kLoraElements = 3;

// Software prefetch spread over a kernel's inner iterations: each step() asks for the next
// lines_per_step cache lines of a block (the next segment's factors), so the requests trickle
// out beside the arithmetic instead of in one burst that fills the miss buffers and stalls it.
struct LoraPrefetch {
  const char* next = nullptr;
  const char* end = nullptr;
  int lines_per_step = 0;

  [[gnu::always_inline]] void step() {
    for (int i = 0; i < lines_per_step && next < end; ++i, next += 64) __builtin_prefetch(next, 0, 3);
  }
  // Whatever step() has not asked for yet.
  void finish() {
    for (; next < end; next += 64) __builtin_prefetch(next, 0, 3);
  }
};

struct LoraKernels {
  // Both call prefetch.step() once per inner iteration (the portable ones never do).
  //
  // t[i][j] = scale·Σ_k x[i][k]·a[j][k] for i < rows, j < rank; x holds `rows` row pointers
  // and a is [rank][n_in]. Each dot product is split over the ISA's lanes (k mod lanes), the
  // lanes are summed in a fixed order, then the sum is multiplied by the scale.
  using Shrink = void (*)(const float* const* x, int rows, const void* a, int rank, int n_in, float scale, float* t,
                          int ldt, LoraPrefetch& prefetch);
  // y[i][n] += Σ_j t[i][j]·b_t[j][n] for i < rows, n < n_out; y holds `rows` row pointers and
  // b_t is [rank][n_out]. The sum over j runs in order from zero, then is added to y once.
  using Expand = void (*)(const float* t, int ldt, int rows, const void* b_t, int rank, int n_out, float* const* y,
                          LoraPrefetch& prefetch);

  Shrink shrink[kLoraElements];
  Expand expand[kLoraElements];
};

extern const LoraKernels lora_portable, lora_avx2, lora_avx512;

}  // namespace pagoda::kernels::detail
