#pragma once
// Fused multi-adapter LoRA (Punica's SGMV, on the CPU): one call adds the LoRA deltas of one
// projection to every row of a batch, each row with its own adapter's factors, in one flat
// pass — the shrink t = scale·(x·Aᵀ) (rank dot products of length n_in) and straight after it
// the expand y += t·Bᵀ — rather than a pair of small GEMMs per adapter segment.
//
// Batch invariance: the bits of y[m][n] depend only on row m of x, on its adapter's factors
// and on the ISA — not on the other rows, the segments, the rows the kernel groups together
// to share weight loads, or the thread count. Each t[m][j] is one dot product in a fixed
// lane-split order, then one product with the scale; each delta y[m][n] is one chain over j
// in order, added to y once.

#include "kernels/lora_factors.h"

namespace pagoda::kernels {

// The rows rows[begin..end) of a batch, which share one adapter's factors (nullptr: no delta).
struct LoraSegment {
  int begin = 0;
  int end = 0;
  const LoraFactors* factors = nullptr;
};

// For every row m named by a segment: y[m][n] += Σ_j (scale·Σ_k x[m][k]·A[j][k])·B[n][j]
// with that segment's A, B and scale. `rows` lists batch rows grouped by adapter (in any
// order, so rows of one adapter need not be neighbours in the batch to share its loads);
// segments are consecutive, disjoint ranges of it from position 0, and each row appears at
// most once. Rows not listed are left alone. Every segment's factors must have the same n_in
// and n_out; their element types may differ. tmp is scratch of [positions][ld_tmp] floats,
// ld_tmp ≥ the largest rank. Runs in parallel in the caller's tbb::task_arena when the work
// is large enough to pay for waking threads.
void lora_sgmv(const float* x, int ldx, const int* rows, const LoraSegment* segments, int n_segments, float* tmp,
               int ld_tmp, float* y, int ldy);

// One projection of a multi-projection lora_sgmv: its segments (the same begin and end as
// every other output's, each with this projection's factors) and its output rows.
struct LoraOutput {
  const LoraSegment* segments = nullptr;
  float* y = nullptr;
  int ldy = 0;
};

// lora_sgmv for several projections of the same x at once (Q, K and V; gate and up): one
// parallel pass instead of one per projection, each group of rows running every projection in
// turn while its x is in L1. Each output's bits are those lora_sgmv gives it alone.
void lora_sgmv(const float* x, int ldx, const int* rows, int n_segments, const LoraOutput* outputs, int n_outputs,
               float* tmp, int ld_tmp);

}  // namespace pagoda::kernels
