#pragma once
// Internal: the per-ISA halves of lora_sgmv, for a group of up to kLoraGroupRows rows that
// share one adapter (so they share every load of its factors). Each *_avx512/_avx2/_portable
// translation unit defines one table. Whatever the group's size, every output's arithmetic is
// that of the row alone: the grouping only shares loads.

namespace pagoda::kernels::detail {

inline constexpr int kLoraGroupRows = 4;

struct LoraKernels {
  // t[i][j] = Σ_k x[i][k]·a[j][k] for i < rows, j < rank; x holds `rows` row pointers and a
  // is [rank][n_in]. Each dot product is split over the ISA's lanes (k mod lanes), then the
  // lanes are summed in a fixed order.
  void (*shrink)(const float* const* x, int rows, const float* a, int rank, int n_in, float* t, int ldt);
  // y[i][n] += Σ_j t[i][j]·b_t[j][n] for i < rows, n < n_out; y holds `rows` row pointers and
  // b_t is [rank][n_out]. The sum over j runs in order from zero, then is added to y once.
  void (*expand)(const float* t, int ldt, int rows, const float* b_t, int rank, int n_out, float* const* y);
};

extern const LoraKernels lora_portable, lora_avx2, lora_avx512;

}  // namespace pagoda::kernels::detail
