#pragma once
// A mixture-of-experts FFN over a step's rows (Mixtral-style llama, qwen2moe, qwen3moe).
//
// Each row's router logits go through a softmax over every expert; its top n_experts_used
// experts (ties to the lower index) are weighted by their probabilities, divided by their sum
// when the family normalises them. The step's (row, expert) pairs are then grouped by expert,
// and each chosen expert runs its gate|up GEMM, SwiGLU and down GEMM once over all its rows:
// a batch reads each active expert's weights once, however many rows chose it.
//
// Batch invariance: the kernels compute each row independently of the others in its GEMM,
// and a row's expert outputs are summed in its own rank order (then qwen2moe's gated shared
// expert), so the grouping changes which rows run together, never a row's arithmetic.

#include <cstdint>
#include <vector>

#include "engine/model/model.h"
#include "kernels/quant/weight_matrix.h"

namespace pagoda {

// Per-step buffers, reused across layers and steps (grown on demand).
struct MoeScratch {
  std::vector<float> logits;                    // [row][n_experts]
  std::vector<int32_t> chosen;                  // [row][k] expert of each rank
  std::vector<float> weight;                    // [row][k]
  std::vector<int32_t> slot;                    // [row][k] the pair's place in the grouped order
  std::vector<int32_t> expert_begin;            // [n_experts + 1] each expert's run in the grouped order
  std::vector<int32_t> pair_row;                // [pair] the row of each pair, grouped by expert
  std::vector<int32_t> next;                    // [n_experts] the next free place of each expert's run
  std::vector<int32_t> active;                  // the experts some row chose
  std::vector<float> in, gate_up, hidden, out;  // [pair][...] grouped
  std::vector<float> shared_gate_up, shared_hidden, shared_out;  // [row][...]
};

class MoeFfn {
 public:
  // Packs the router, each expert and the shared expert of `w` (pack_weights; `discard` as
  // there). The LayerWeights' views must outlive nothing here: the matrices are the kernels'.
  MoeFfn(const ModelConfig& c, const LayerWeights& w, bool discard);

  // out[r·ld_out + i] = the FFN of x[r·ld_x + …] for rows r < n, i < dim.
  void forward(const float* x, int ld_x, int n, float* out, int ld_out, MoeScratch& s) const;

  // Multiply-adds of one row (router, the used experts, the shared expert), for flop counts.
  double row_flops() const;
  // Weight bytes the last forward with `s` read: the router, each expert some row chose (once,
  // however many rows chose it) and the shared expert.
  double bytes_read(const MoeScratch& s) const;

 private:
  struct Expert {
    kernels::WeightMatrix gate_up;  // [2 ffn][dim]
    kernels::WeightMatrix down;     // [dim][ffn]
  };
  void route(const float* x, int ld_x, int n, MoeScratch& s) const;
  // The expert's GEMMs over its `m` gathered rows: s.in → s.out, from pair `begin` on.
  void run_expert(const Expert& e, int ffn, int begin, int m, MoeScratch& s) const;

  int32_t dim_, n_experts_, n_used_, ffn_, shared_ffn_;
  bool normalize_;
  kernels::WeightMatrix router_;  // [n_experts][dim]
  std::vector<Expert> experts_;
  Expert shared_;
  std::vector<float> shared_gate_;  // [dim], or empty
};

}  // namespace pagoda
