#include "kernels/ops.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <cstddef>

#include "kernels/dispatch.h"

namespace pagoda::kernels {

void rmsnorm(const float* x, const float* weight, float* out, int n, float eps) {
  detail::active_table().ops->rmsnorm(x, weight, out, n, eps);
}

void rmsnorm_rows(const float* x, int ldx, const float* weight, float* out, int ldo, int rows,
                  int n, float eps) {
  const auto fn = detail::active_table().ops->rmsnorm;
  // Rows in blocks: one row is too little work for a task of its own.
  tbb::parallel_for(tbb::blocked_range<int>(0, rows, 16), [&](const tbb::blocked_range<int>& r) {
    for (int i = r.begin(); i < r.end(); ++i) fn(x + std::size_t(i) * ldx, weight, out + std::size_t(i) * ldo, n, eps);
  });
}

void swiglu(const float* gate, const float* up, float* out, int n) {
  detail::active_table().ops->swiglu(gate, up, out, n);
}

void softmax(float* x, int n) { detail::active_table().ops->softmax(x, n); }

int argmax(const float* x, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return best;
}

}  // namespace pagoda::kernels
