#include "kernels/lora_sgmv.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>

#include <algorithm>
#include <cassert>

#include "kernels/cpu_features.h"
#include "kernels/lora_sgmv_impl.h"

namespace pagoda::kernels {

namespace {

// Below this many multiply-adds (a few microseconds: one decode row on a small model, say)
// waking other threads costs more than it saves.
constexpr double kParallelWork = 1 << 15;

const detail::LoraKernels& kernels_for(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return detail::lora_avx512;
    case Isa::Avx2: return detail::lora_avx2;
    case Isa::Portable: break;
  }
  return detail::lora_portable;
}

// A prefetch of `next`'s factors spread over the kernel iterations of one group on `current`
// (AVX-512's count, rank·(n_in + n_out)/64; AVX2 runs more and finishes early), at a rate that
// asks for the last line at about two thirds of them.
detail::LoraPrefetch prefetch_for(const LoraFactors* next, const LoraFactors* current) {
  if (!next) return {};
  const char* p = static_cast<const char*>(next->a());
  const std::size_t lines = (next->bytes() + 63) / 64;
  const std::size_t iterations =
      current ? std::max<std::size_t>(1, std::size_t(current->rank()) * (current->n_in() + current->n_out()) / 64) : 1;
  return {p, p + next->bytes(), int(std::min<std::size_t>(lines, (3 * lines + 2 * iterations - 1) / (2 * iterations)))};
}

}  // namespace

void lora_sgmv(const float* x, int ldx, const int* rows, int n_segments, const LoraOutput* outputs, int n_outputs,
               float* tmp, int ld_tmp) {
  double work = 0.0;
  for (int o = 0; o < n_outputs; ++o) {
    const LoraSegment* segments = outputs[o].segments;
    for (int s = 0; s < n_segments; ++s) {
      const LoraFactors* f = segments[s].factors;
      assert(segments[s].begin == (s == 0 ? 0 : segments[s - 1].end));
      assert(segments[s].begin == outputs[0].segments[s].begin && segments[s].end == outputs[0].segments[s].end);
      if (!f) continue;
      assert(f->rank() <= ld_tmp);
      work += double(segments[s].end - segments[s].begin) * f->rank() * (f->n_in() + f->n_out());
    }
  }
  if (work == 0.0) return;
  const detail::LoraKernels& k = kernels_for(active_isa());
  const LoraSegment* segments = outputs[0].segments;

  // Positions [p0, p1) of `rows`: each segment's rows in groups of kLoraGroupRows, each group's
  // shrink straight followed by its expand while its t is in L1, projection after projection
  // while its x is. A segment's first group also fetches, spread over its iterations, the next
  // segment's factors of the same projection: a segment's rows are often too few (one, in a
  // decode step with many adapters) for the hardware prefetcher to lock on to its factors.
  auto positions = [&](int p0, int p1) {
    int s = int(std::upper_bound(segments, segments + n_segments, p0,
                                 [](int p, const LoraSegment& seg) { return p < seg.end; }) -
                segments);
    for (; s < n_segments && segments[s].begin < p1; ++s) {
      const bool next_is_ours = s + 1 < n_segments && segments[s + 1].begin < p1;
      const int first = std::max(p0, segments[s].begin), end = std::min(p1, segments[s].end);
      for (int p = first; p < end; p += detail::kLoraGroupRows) {
        const int group = std::min(detail::kLoraGroupRows, end - p);
        const float* x_rows[detail::kLoraGroupRows];
        for (int i = 0; i < group; ++i) x_rows[i] = x + std::size_t(rows[p + i]) * ldx;
        float* t = tmp + std::size_t(p) * ld_tmp;
        for (int o = 0; o < n_outputs; ++o) {
          const LoraFactors* f = outputs[o].segments[s].factors;
          const LoraFactors* next = next_is_ours && p == first ? outputs[o].segments[s + 1].factors : nullptr;
          detail::LoraPrefetch prefetch = prefetch_for(next, f);
          if (f) {
            float* y_rows[detail::kLoraGroupRows];
            for (int i = 0; i < group; ++i) y_rows[i] = outputs[o].y + std::size_t(rows[p + i]) * outputs[o].ldy;
            const int e = int(f->element());
            k.shrink[e](x_rows, group, f->a(), f->rank(), f->n_in(), f->scale(), t, ld_tmp, prefetch);
            k.expand[e](t, ld_tmp, group, f->b_t(), f->rank(), f->n_out(), y_rows, prefetch);
          }
          prefetch.finish();
        }
      }
    }
  };
  const int n_positions = segments[n_segments - 1].end;
  if (work < kParallelWork) {
    positions(0, n_positions);
  } else {
    // One even share of the rows per thread, so each thread's chain of prefetches runs unbroken.
    tbb::parallel_for(
        tbb::blocked_range<int>(0, n_positions, detail::kLoraGroupRows),
        [&](const tbb::blocked_range<int>& r) { positions(r.begin(), r.end()); }, tbb::static_partitioner());
  }
}

void lora_sgmv(const float* x, int ldx, const int* rows, const LoraSegment* segments, int n_segments, float* tmp,
               int ld_tmp, float* y, int ldy) {
  const LoraOutput output{segments, y, ldy};
  lora_sgmv(x, ldx, rows, n_segments, &output, 1, tmp, ld_tmp);
}

}  // namespace pagoda::kernels
