#include "engine/forward/moe_ffn.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>

#include "engine/forward/pack_weights.h"
#include "kernels/gemm.h"
#include "kernels/ops.h"

namespace pagoda {

MoeFfn::MoeFfn(const ModelConfig& c, const LayerWeights& w, bool discard)
    : dim_(c.dim),
      n_experts_(c.n_experts),
      n_used_(c.n_experts_used),
      ffn_(c.moe_ffn_dim()),
      shared_ffn_(c.has_shared_expert() ? c.shared_ffn_dim : 0),
      normalize_(c.normalizes_expert_weights()),
      router_(pack_weights({&w.ffn_gate_inp}, discard)),
      experts_(size_t(c.n_experts)) {
  tbb::parallel_for(0, n_experts_, [&](int e) {
    const ExpertWeights& x = w.experts[size_t(e)];
    experts_[size_t(e)] = {pack_weights({&x.gate, &x.up}, discard), pack_weights({&x.down}, discard)};
  });
  if (shared_ffn_ > 0) {
    shared_ = {pack_weights({&w.shared_expert.gate, &w.shared_expert.up}, discard),
               pack_weights({&w.shared_expert.down}, discard)};
    shared_gate_ = w.shared_expert_gate;
  }
}

void MoeFfn::route(const float* x, int ld_x, int n, MoeScratch& s) const {
  const int E = n_experts_, K = n_used_;
  s.logits.resize(size_t(n) * E);
  s.chosen.resize(size_t(n) * K);
  s.weight.resize(size_t(n) * K);
  kernels::matmul(x, n, ld_x, router_, s.logits.data(), E);
  tbb::parallel_for(tbb::blocked_range<int>(0, n, 16), [&](const tbb::blocked_range<int>& r) {
    std::vector<int32_t> order(static_cast<size_t>(E));
    for (int row = r.begin(); row < r.end(); ++row) {
      float* p = s.logits.data() + size_t(row) * E;
      kernels::softmax(p, E);
      for (int e = 0; e < E; ++e) order[size_t(e)] = e;
      std::partial_sort(order.begin(), order.begin() + K, order.end(),
                        [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
      float total = 0.0f;
      for (int k = 0; k < K; ++k) total += p[order[size_t(k)]];
      for (int k = 0; k < K; ++k) {
        const int32_t e = order[size_t(k)];
        s.chosen[size_t(row) * K + k] = e;
        s.weight[size_t(row) * K + k] = normalize_ ? p[e] / total : p[e];
      }
    }
  });
  // Group the pairs by expert (a counting sort, rows in order within each expert).
  s.expert_begin.assign(size_t(E) + 1, 0);
  for (int32_t e : s.chosen) ++s.expert_begin[size_t(e) + 1];
  for (int e = 0; e < E; ++e) s.expert_begin[size_t(e) + 1] += s.expert_begin[size_t(e)];
  s.next.assign(s.expert_begin.begin(), s.expert_begin.end() - 1);
  s.slot.resize(size_t(n) * K);
  s.pair_row.resize(size_t(n) * K);
  for (int row = 0; row < n; ++row) {
    for (int k = 0; k < K; ++k) {
      const int32_t at = s.next[size_t(s.chosen[size_t(row) * K + k])]++;
      s.slot[size_t(row) * K + k] = at;
      s.pair_row[size_t(at)] = row;
    }
  }
}

void MoeFfn::run_expert(const Expert& e, int ffn, int begin, int m, MoeScratch& s) const {
  float* gate_up = s.gate_up.data() + size_t(begin) * 2 * ffn;
  float* hidden = s.hidden.data() + size_t(begin) * ffn;
  kernels::matmul(s.in.data() + size_t(begin) * dim_, m, dim_, e.gate_up, gate_up, 2 * ffn);
  for (int r = 0; r < m; ++r) {
    const float* g = gate_up + size_t(r) * 2 * ffn;
    kernels::swiglu(g, g + ffn, hidden + size_t(r) * ffn, ffn);
  }
  kernels::matmul(hidden, m, ffn, e.down, s.out.data() + size_t(begin) * dim_, dim_);
}

void MoeFfn::forward(const float* x, int ld_x, int n, float* out, int ld_out, MoeScratch& s) const {
  const int K = n_used_;
  route(x, ld_x, n, s);
  const size_t pairs = size_t(n) * K;
  s.in.resize(pairs * dim_);
  s.gate_up.resize(pairs * 2 * ffn_);
  s.hidden.resize(pairs * ffn_);
  s.out.resize(pairs * dim_);
  tbb::parallel_for(tbb::blocked_range<size_t>(0, pairs, 16), [&](const tbb::blocked_range<size_t>& r) {
    for (size_t p = r.begin(); p < r.end(); ++p)
      std::copy_n(x + size_t(s.pair_row[p]) * ld_x, dim_, s.in.data() + p * dim_);
  });
  // Every chosen expert once over its rows; experts run side by side, each GEMM in parallel too.
  s.active.clear();
  for (int e = 0; e < n_experts_; ++e)
    if (s.expert_begin[size_t(e) + 1] > s.expert_begin[size_t(e)]) s.active.push_back(e);
  tbb::parallel_for(0, int(s.active.size()), [&](int i) {
    const int e = s.active[size_t(i)];
    const int begin = s.expert_begin[size_t(e)];
    run_expert(experts_[size_t(e)], ffn_, begin, s.expert_begin[size_t(e) + 1] - begin, s);
  });
  if (shared_ffn_ > 0) {
    s.shared_gate_up.resize(size_t(n) * 2 * shared_ffn_);
    s.shared_hidden.resize(size_t(n) * shared_ffn_);
    s.shared_out.resize(size_t(n) * dim_);
    kernels::matmul(x, n, ld_x, shared_.gate_up, s.shared_gate_up.data(), 2 * shared_ffn_);
    for (int r = 0; r < n; ++r) {
      const float* g = s.shared_gate_up.data() + size_t(r) * 2 * shared_ffn_;
      kernels::swiglu(g, g + shared_ffn_, s.shared_hidden.data() + size_t(r) * shared_ffn_, shared_ffn_);
    }
    kernels::matmul(s.shared_hidden.data(), n, shared_ffn_, shared_.down, s.shared_out.data(), dim_);
  }
  // Each row: its experts' outputs in rank order, weighted, then the gated shared expert.
  tbb::parallel_for(tbb::blocked_range<int>(0, n, 8), [&](const tbb::blocked_range<int>& r) {
    for (int row = r.begin(); row < r.end(); ++row) {
      float* o = out + size_t(row) * ld_out;
      std::fill_n(o, dim_, 0.0f);
      for (int k = 0; k < K; ++k) {
        const float w = s.weight[size_t(row) * K + k];
        const float* y = s.out.data() + size_t(s.slot[size_t(row) * K + k]) * dim_;
        for (int i = 0; i < dim_; ++i) o[i] += w * y[i];
      }
      if (shared_ffn_ > 0) {
        const float* xr = x + size_t(row) * ld_x;
        float g = 0.0f;
        for (int i = 0; i < dim_; ++i) g += shared_gate_[size_t(i)] * xr[i];
        const float gate = 1.0f / (1.0f + std::exp(-g));
        const float* y = s.shared_out.data() + size_t(row) * dim_;
        for (int i = 0; i < dim_; ++i) o[i] += gate * y[i];
      }
    }
  });
}

double MoeFfn::bytes_read(const MoeScratch& s) const {
  double total = double(router_.encoded_bytes());
  for (const int e : s.active)
    total += double(experts_[size_t(e)].gate_up.encoded_bytes() + experts_[size_t(e)].down.encoded_bytes());
  if (shared_ffn_ > 0) total += double(shared_.gate_up.encoded_bytes() + shared_.down.encoded_bytes());
  return total;
}

double MoeFfn::row_flops() const {
  return 2.0 * dim_ * (n_experts_ + 3.0 * ffn_ * n_used_ + 3.0 * shared_ffn_ + (shared_ffn_ > 0 ? 1.0 : 0.0));
}

}  // namespace pagoda
