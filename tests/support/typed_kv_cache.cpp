#include "support/typed_kv_cache.h"

#include <cmath>

#include "kernels/attention.h"
#include "kernels/kv_rows.h"
#include "support/kernel_support.h"

namespace pagoda::test {

TypedCache::TypedCache(KvCacheType type, int head_dim, int n_ctx, int tokens_per_page, unsigned seed)
    : type(type), head_dim(head_dim), n_ctx(n_ctx), tokens_per_page(tokens_per_page) {
  const size_t row = kernels::kv_row_bytes(type, head_dim);
  const int pages = (n_ctx + tokens_per_page - 1) / tokens_per_page;
  const auto garbage = random_uniform(head_dim, seed + 7, 50.0f, 60.0f);
  for (int p = 0; p < pages; ++p) {
    k_store.emplace_back(row * tokens_per_page), v_store.emplace_back(row * tokens_per_page);
    for (int s = 0; s < tokens_per_page; ++s) {
      kernels::store_kv_row(type, garbage.data(), head_dim, k_store.back().data() + s * row);
      kernels::store_kv_row(type, garbage.data(), head_dim, v_store.back().data() + s * row);
    }
  }
  const auto k_in = random_uniform(size_t(n_ctx) * head_dim, seed, -2.0f, 2.0f);
  const auto v_in = random_uniform(size_t(n_ctx) * head_dim, seed + 1);
  k.resize(k_in.size()), v.resize(v_in.size());
  for (int t = 0; t < n_ctx; ++t) {
    std::byte* kr = k_store[t / tokens_per_page].data() + (t % tokens_per_page) * row;
    std::byte* vr = v_store[t / tokens_per_page].data() + (t % tokens_per_page) * row;
    kernels::store_kv_row(type, k_in.data() + size_t(t) * head_dim, head_dim, kr);
    kernels::store_kv_row(type, v_in.data() + size_t(t) * head_dim, head_dim, vr);
    kernels::load_kv_row(type, kr, head_dim, k.data() + size_t(t) * head_dim);
    kernels::load_kv_row(type, vr, head_dim, v.data() + size_t(t) * head_dim);
  }
  for (int p = 0; p < pages; ++p) k_pages.push_back(k_store[p].data()), v_pages.push_back(v_store[p].data());
}

std::vector<float> TypedCache::attend(const std::vector<float>& q, int group, float scale) const {
  std::vector<float> out(size_t(group) * head_dim, NAN);
  kernels::paged_attention(type, q.data(), group, head_dim, n_ctx, k_pages.data(), v_pages.data(), tokens_per_page,
                           scale, out.data());
  return out;
}

}  // namespace pagoda::test
