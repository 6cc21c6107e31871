#include "kernels/attention.h"

#include <vector>

#include "kernels/dispatch.h"

namespace pagoda::kernels {

void paged_attention(KvCacheType type, const float* q, int group, int head_dim, int n_ctx,
                     const std::byte* const* k_pages, const std::byte* const* v_pages, int tokens_per_page, float scale,
                     float* out) {
  detail::active_table().attention->paged_attention[int(type)](q, group, head_dim, n_ctx, k_pages, v_pages,
                                                               tokens_per_page, scale, out);
}

void paged_attention_tokens(KvCacheType type, const float* q, size_t q_stride, int tokens, int group, int head_dim,
                            int n_ctx0, const std::byte* const* k_pages, const std::byte* const* v_pages,
                            int tokens_per_page, float scale, float* out, size_t out_stride, AttentionVariant variant) {
  detail::active_table().attention->paged_attention_tokens[int(type)](
      q, q_stride, tokens, group, head_dim, n_ctx0, k_pages, v_pages, tokens_per_page, scale, out, out_stride, variant);
}

void paged_attention(const float* q, int group, int head_dim, int n_ctx, const float* const* k_pages,
                     const float* const* v_pages, int tokens_per_page, float scale, float* out) {
  const auto n_pages = size_t((n_ctx + tokens_per_page - 1) / tokens_per_page);
  static thread_local std::vector<const std::byte*> k, v;  // reused: no allocation per call
  k.resize(n_pages), v.resize(n_pages);
  for (size_t i = 0; i < n_pages; ++i) {
    k[i] = reinterpret_cast<const std::byte*>(k_pages[i]);
    v[i] = reinterpret_cast<const std::byte*>(v_pages[i]);
  }
  paged_attention(KvCacheType::F32, q, group, head_dim, n_ctx, k.data(), v.data(), tokens_per_page, scale, out);
}

void attention_contiguous(const float* q, int group, int head_dim, int n_ctx, const float* k, const float* v,
                          float scale, float* out) {
  const auto* kb = reinterpret_cast<const std::byte*>(k);
  const auto* vb = reinterpret_cast<const std::byte*>(v);
  paged_attention(KvCacheType::F32, q, group, head_dim, n_ctx, &kb, &vb, n_ctx, scale, out);
}

}  // namespace pagoda::kernels
