#pragma once
// An embedding request's pooling: which of its prompt's final hidden states (rows of the step's
// hidden output, ModelRunner::forward) each prefill chunk must return, and the vector they make.
// Rows are added in position order; a position already pooled (a prompt recomputed after a
// preemption) is skipped, so the result depends on the prompt alone, never on its chunking.

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "pagoda/request.h"

namespace pagoda {

class EmbeddingPooler {
 public:
  // Which position a rank head scores: an encoder's first ([CLS], as Cls pools), a decoder's last
  // (Qwen3-Reranker's, whose last position has read the whole pair, as Last pools).
  enum class RankRow { First, Last };
  // `pooling` is Mean, Cls, Last, Rank or None (Pooling::Model already resolved by the engine).
  // Rank keeps the row of `rank_row`; the rank head that scores it is the caller's. None keeps
  // every row.
  EmbeddingPooler(Pooling pooling, bool normalize, int32_t prompt_len, int32_t dim, RankRow rank_row = RankRow::First);

  Pooling pooling() const { return pooling_; }
  // The rows a chunk of positions [first, first + n) returns: all of them (`all`, for mean
  // pooling, and for cls the chunk holding position 0), or its last (`last`, when it ends the
  // prompt under last pooling), or none.
  struct Rows {
    bool all = false;
    bool last = false;
  };
  Rows rows_for(int32_t first, int32_t n) const;

  // The final hidden state of `position` (dim floats).
  void add(int32_t position, std::span<const float> row);
  // Rank: the kept row (of rank_row's position), which the caller's rank head scores, and its score.
  std::vector<float> kept_row() const { return {sum_.begin(), sum_.end()}; }
  void set_score(float score);

  // Every row the pooling needs was added (and with Rank, the score set).
  bool complete() const;
  // The pooled vector, L2-normalized when asked (a zero vector stays zero); with None, every
  // row in position order, each normalized alone. Only when complete().
  std::vector<float> result() const;

 private:
  // The position whose row cls, last and rank keep (-1 for mean).
  int32_t kept_position() const;

  Pooling pooling_;
  RankRow rank_row_;
  bool normalize_;
  int32_t prompt_len_;
  int32_t dim_;
  std::vector<double> sum_;     // mean: the sum so far, in position order; cls, last, rank: the row
  std::vector<float> rows_;     // none: every row so far, in position order
  int32_t pooled_ = 0;          // mean, none: positions added (0 .. pooled_ - 1); cls, last, rank: 1 once added
  std::optional<float> score_;  // rank
};

}  // namespace pagoda
