#include "kernels/gemm.h"

#include <tbb/blocked_range2d.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cassert>
#include <new>
#include <string>

#include "kernels/dispatch.h"
#include "pagoda/error.h"

namespace pagoda::kernels {

namespace {

constexpr std::size_t kAlignment = 64;

// Depth of one K block: a panel's kKBlock×NR slice (24 KiB at NR=48) stays in L1 while every
// row tile of the task streams past it. Splitting K this way keeps each output's chain intact:
// the partial sum goes to C and is reloaded unchanged for the next block.
constexpr int kKBlock = 128;

// Rows of A handled by one task at most, so its A block stays in L2 across all its panels.
constexpr int kTaskRows = 128;

// Below this many multiply-adds (a few microseconds of work) waking other threads costs more
// than it saves, as in every matmul of a tiny model's decode step.
constexpr double kParallelWork = 1 << 17;

int ceil_div(int a, int b) { return (a + b - 1) / b; }

void run(const float* A, int M, int lda, const PackedMatrix& W, float* C, int ldc, bool accumulate) {
  const int N = W.rows();
  const int K = W.cols();
  if (M <= 0 || N <= 0) return;
  if (K == 0) {
    if (!accumulate)
      for (int m = 0; m < M; ++m) std::fill(C + std::size_t(m) * ldc, C + std::size_t(m) * ldc + N, 0.0f);
    return;
  }
  const detail::GemmKernels& kernels = *detail::table_for(W.isa()).gemm;
  const int mr = kernels.tile_rows;
  const int nr = W.panel_cols();
  const int row_tiles = ceil_div(M, mr);
  const int panels = ceil_div(N, nr);
  const int rows_grain = std::max(1, kTaskRows / mr);

  auto body = [&](const tbb::blocked_range2d<int>& range) {
    const int t0 = range.rows().begin(), tiles = range.rows().size();
    const int p0 = range.cols().begin(), p1 = range.cols().end();
    detail::GemmTile tile{};
    tile.lda = lda;
    tile.ldc = ldc;
    for (int k0 = 0; k0 < K; k0 += kKBlock) {
      tile.depth = std::min(kKBlock, K - k0);
      tile.load_c = accumulate || k0 > 0;
      for (int p = p0; p < p1; ++p) {
        tile.panel = W.panel(p) + std::size_t(k0) * nr;
        tile.n_valid = std::min(nr, N - p * nr);
        // The panel block this task reads next; its row tiles share out prefetching it.
        const int next_p = p + 1 < p1 ? p + 1 : p0;
        const int next_k0 = p + 1 < p1 ? k0 : k0 + kKBlock;
        const int next_lines = next_k0 < K ? std::min(kKBlock, K - next_k0) * nr * 4 / 64 : 0;
        const char* next =
            next_lines > 0 ? reinterpret_cast<const char*>(W.panel(next_p) + std::size_t(next_k0) * nr) : nullptr;
        for (int i = 0; i < tiles; ++i) {
          const int m0 = (t0 + i) * mr;
          const int first_line = next_lines * i / tiles;
          tile.a = A + std::size_t(m0) * lda + k0;
          tile.c = C + std::size_t(m0) * ldc + p * nr;
          tile.prefetch = next + 64 * first_line;
          tile.prefetch_lines = next_lines * (i + 1) / tiles - first_line;
          kernels.tile[std::min(mr, M - m0)](tile);
        }
      }
    }
  };
  const tbb::blocked_range2d<int> all(0, row_tiles, rows_grain, 0, panels, 1);
  if (double(M) * N * K < kParallelWork) body(all);
  else tbb::parallel_for(all, body);
}

}  // namespace

void PackedMatrix::AlignedFree::operator()(float* p) const { ::operator delete[](p, std::align_val_t(kAlignment)); }

PackedMatrix PackedMatrix::pack(const float* w, int n_out, int n_in) { return pack(w, n_out, n_in, active_isa()); }

PackedMatrix PackedMatrix::pack(const float* w, int n_out, int n_in, Isa isa,
                                const std::function<void(const void*, std::size_t)>& consumed) {
  assert(n_out >= 0 && n_in >= 0);
  if (!cpu_supports(isa)) throw Error(std::string("cannot pack a matrix for ") + isa_name(isa) + ": this CPU lacks it");
  PackedMatrix m;
  m.isa_ = isa;
  m.rows_ = n_out;
  m.cols_ = n_in;
  m.panel_cols_ = detail::table_for(isa).gemm->panel_cols;
  const int nr = m.panel_cols_;
  const int panels = ceil_div(n_out, nr);
  const std::size_t count = std::size_t(panels) * nr * n_in;
  m.data_.reset(static_cast<float*>(
      ::operator new[](std::max<std::size_t>(count, 1) * sizeof(float), std::align_val_t(kAlignment))));
  // About 1 MiB of source rows a task, handed to `consumed` once packed.
  const int chunk = std::max(1, int((std::size_t(1) << 20) / (std::max<std::size_t>(n_in, 1) * sizeof(float) * nr)));
  tbb::parallel_for(0, ceil_div(panels, chunk), [&](int c) {
    const int first = c * chunk, last = std::min(panels, first + chunk);
    for (int p = first; p < last; ++p) {
      float* dst = m.data_.get() + std::size_t(p) * nr * n_in;
      for (int j = 0; j < nr; ++j) {
        const int n = p * nr + j;
        for (int k = 0; k < n_in; ++k) dst[std::size_t(k) * nr + j] = n < n_out ? w[std::size_t(n) * n_in + k] : 0.0f;
      }
    }
    const int rows = std::min(n_out, last * nr) - first * nr;
    if (consumed && rows > 0) consumed(w + std::size_t(first) * nr * n_in, std::size_t(rows) * n_in * sizeof(float));
  });
  return m;
}

void matmul(const float* A, int M, int lda, const PackedMatrix& W, float* C, int ldc) {
  run(A, M, lda, W, C, ldc, false);
}

void matmul_accumulate(const float* A, int M, int lda, const PackedMatrix& W, float* C, int ldc) {
  run(A, M, lda, W, C, ldc, true);
}

}  // namespace pagoda::kernels
