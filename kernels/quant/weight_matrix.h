#pragma once
// A model's weight matrix in its file encoding, and C = A·Wᵀ against it.
//
// Memory: F32 parts are repacked once into a PackedMatrix (kernels/gemm.h) and quantized parts
// into 16-row interleaved tiles (kernels/quant/interleaved.h), after which the caller may drop
// the mapped original (copied_at_make); F16 / BF16 parts are read in place from the caller's
// memory (the model's read-only mmap, which must outlive the matrix) — never two copies.
//
// Arithmetic: F16 / BF16 rows are dotted with the f32 activation row (half_dot.h); quantized
// rows with the activation row quantized once per call and row (Q8_0-like blocks for the
// 32-element types, Q8_K for the K-quants, as ggml does) using exact integer block totals
// (interleaved.h). Each output C[m][n] is one dot product whose float operations are fixed by
// the type alone, so its bits depend only on row m of A and row n of W: not on M, on the path
// (few rows stream the weights once for all rows; many rows reuse each tile for several), on
// the tile, the thread count or the partitioning. The quantized and half types even give the
// same bits on every ISA; F32 is PackedMatrix's per-ISA chain.

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/gemm.h"
#include "kernels/quant/ggml_blocks.h"

namespace pagoda::kernels {

// `rows` rows of a matrix in ggml's `type` encoding, each row `cols` values, rows back to back.
// When set, `consumed(begin, bytes)` is told of each stretch of `data` that make() has copied
// and will not read again (from any thread), so the caller can release it early.
struct WeightPart {
  QuantType type;
  const void* data;
  int rows;
  std::function<void(const void*, std::size_t)> consumed = {};
};

class WeightMatrix {
 public:
  WeightMatrix() = default;

  // The parts stacked by rows (e.g. Q, K, V fused), all `cols` wide. Types: F32, F16, BF16,
  // Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K … Q6_K, IQ4_NL, IQ4_XS; cols must be whole blocks of
  // each type.
  // Throws pagoda::Error otherwise. Kernels are those of `isa` (default: the active ISA).
  static WeightMatrix make(std::span<const WeightPart> parts, int cols);
  static WeightMatrix make(std::span<const WeightPart> parts, int cols, Isa isa);

  int rows() const { return rows_; }
  int cols() const { return cols_; }
  Isa isa() const { return isa_; }

  struct Part {
    QuantType type;
    const uint8_t* data;  // F16 / BF16 rows in place; null otherwise
    int rows;
    int first_row;  // within the whole matrix
    std::size_t row_bytes;
    PackedMatrix packed;                     // F32
    std::shared_ptr<const uint8_t[]> tiles;  // quantized types, interleaved (kernels/quant/interleaved.h)
  };
  const std::vector<Part>& parts() const { return parts_; }
  // The weights' bytes as the file encodes them: what one pass over the matrix reads from
  // memory (bandwidth rooflines count these).
  std::size_t encoded_bytes() const {
    std::size_t total = 0;
    for (const Part& p : parts_) total += std::size_t(p.rows) * p.row_bytes;
    return total;
  }

 private:
  Isa isa_ = Isa::Portable;
  int rows_ = 0;
  int cols_ = 0;
  std::vector<Part> parts_;
};

// Whether WeightMatrix::make keeps its own copy of a part of `type` (so the caller may release
// the original's pages).
bool copied_at_make(QuantType type);

// C[m][n] = Σ_k A[m][k]·W[n][k] for m < M, n < W.rows(); A is M×W.cols() with row stride lda,
// C has row stride ldc. Runs in parallel in the caller's tbb::task_arena.
void matmul(const float* A, int M, int lda, const WeightMatrix& W, float* C, int ldc);

// C[m][n] += the same sum (computed whole, then added once; F32 parts add product by
// product as kernels/gemm.h's matmul_accumulate).
void matmul_accumulate(const float* A, int M, int lda, const WeightMatrix& W, float* C, int ldc);

}  // namespace pagoda::kernels
