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

#include <cstddef>
#include <cstdint>
#include <memory>

namespace pagoda::kernels {

// How a LoraFactors stores its values. Factors read from a file of 16-bit floats stay 16-bit
// (half the memory traffic of f32 for the same values) and are widened exactly in registers.
enum class LoraElement : int { F32, F16, BF16 };

// One adapter's factors of one projection, laid out for lora_sgmv: A as [rank][n_in] (each
// shrink dot product reads one contiguous row) and B transposed, [rank][n_out] (the expand
// runs along the output columns), both in one block of `element`s; and the scale, applied to
// the rank-wide intermediate so that B keeps the file's values. Immutable once packed.
class LoraFactors {
 public:
  LoraFactors() = default;

  // a is [rank][n_in] and b is [n_out][rank], row-major, as in a llama.cpp adapter. Values are
  // rounded to `element` (to nearest even): exact for values that were read from a tensor of
  // that type.
  static LoraFactors pack(const float* a, const float* b, int rank, int n_in, int n_out, float scale,
                          LoraElement element = LoraElement::F32);

  int rank() const { return rank_; }
  int n_in() const { return n_in_; }
  int n_out() const { return n_out_; }
  float scale() const { return scale_; }
  LoraElement element() const { return element_; }
  std::size_t element_bytes() const { return element_ == LoraElement::F32 ? 4 : 2; }
  // [rank][n_in] then [rank][n_out] of element(): floats, or IEEE halves or bfloat16s as uint16_t.
  const void* a() const { return data_.get(); }
  const void* b_t() const { return data_.get() + std::size_t(rank_) * n_in_ * element_bytes(); }
  // The whole block, A then Bᵀ.
  std::size_t bytes() const { return std::size_t(rank_) * (std::size_t(n_in_) + n_out_) * element_bytes(); }

 private:
  struct AlignedFree {
    void operator()(std::byte* p) const;
  };

  int rank_ = 0;
  int n_in_ = 0;
  int n_out_ = 0;
  float scale_ = 1.0f;
  LoraElement element_ = LoraElement::F32;
  std::unique_ptr<std::byte[], AlignedFree> data_;
};

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
