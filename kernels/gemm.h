#pragma once
// Dense fp32 GEMM against weights packed once at load: C = A·Wᵀ, the shape of every projection
// (out = W·x) in a transformer, for 1 to thousands of activation rows at a time.
//
// Batch invariance: for a given ISA the bits of C[m][n] depend only on row m of A and row n of
// W — not on M, on where row m falls in a tile, on the thread count or on the partitioning —
// because every output is one multiply-add chain over k in order, never split.

#include <cstddef>
#include <functional>
#include <memory>

#include "kernels/cpu_features.h"

namespace pagoda::kernels {

// A weight matrix W with n_out rows and n_in columns (row-major, as GGUF and llama2.c store
// it), repacked into column panels laid out for one ISA's GEMM kernel.
class PackedMatrix {
 public:
  PackedMatrix() = default;

  // Packs for the ISA active now; matmul always uses the kernel of the ISA packed for, so a
  // later set_isa() changes nothing for matrices already packed.
  static PackedMatrix pack(const float* w, int n_out, int n_in);
  // `consumed`, when set, is called (from any thread) with each stretch of w's rows already
  // packed, so a caller reading w from a mapping can release it as it goes.
  static PackedMatrix pack(const float* w, int n_out, int n_in, Isa isa,
                           const std::function<void(const void*, std::size_t)>& consumed = {});

  int rows() const { return rows_; }  // n_out
  int cols() const { return cols_; }  // n_in
  Isa isa() const { return isa_; }

  // Panel p holds W rows [p·panel_cols, (p+1)·panel_cols) as [n_in][panel_cols], zero-padded.
  int panel_cols() const { return panel_cols_; }
  const float* panel(int p) const { return data_.get() + std::size_t(p) * panel_cols_ * cols_; }

 private:
  struct AlignedFree {
    void operator()(float* p) const;
  };

  Isa isa_ = Isa::Portable;
  int rows_ = 0;
  int cols_ = 0;
  int panel_cols_ = 1;
  std::unique_ptr<float[], AlignedFree> data_;
};

// C[m][n] = Σ_k A[m][k]·W[n][k] for m < M, n < W.rows(); A is M×W.cols() with row stride lda,
// C has row stride ldc. Runs in parallel in the caller's tbb::task_arena.
void matmul(const float* A, int M, int lda, const PackedMatrix& W, float* C, int ldc);

// C[m][n] += Σ_k A[m][k]·W[n][k] (the products are added onto C one by one, in k order).
void matmul_accumulate(const float* A, int M, int lda, const PackedMatrix& W, float* C, int ldc);

}  // namespace pagoda::kernels
