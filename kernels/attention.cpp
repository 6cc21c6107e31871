#include "kernels/attention.h"

#include "kernels/dispatch.h"

namespace pagoda::kernels {

void paged_attention(const float* q, int group, int head_dim, int n_ctx,
                     const float* const* k_pages, const float* const* v_pages,
                     int tokens_per_page, float scale, float* out) {
  detail::active_table().attention->paged_attention(q, group, head_dim, n_ctx, k_pages, v_pages,
                                                    tokens_per_page, scale, out);
}

void attention_contiguous(const float* q, int group, int head_dim, int n_ctx, const float* k,
                          const float* v, float scale, float* out) {
  paged_attention(q, group, head_dim, n_ctx, &k, &v, n_ctx, scale, out);
}

}  // namespace pagoda::kernels
