#pragma once
// A step's rerank pairs scored together: the kept row of each sequence whose pooling is Rank goes
// through the rank head in one call, and each score back to its pooler. The decode and encoder
// actors share it; their runners hold the heads (ModelRunner's and EncoderRunner's rank_scores).

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/request/sequence.h"

namespace pagoda {

// `sequences`: Sequence pointers (raw or owning) whose embeddings are complete but for a rank
// score. `rank_scores(rows, n, scores)` scores n rows of `dim` floats. `rows` and `scores` are
// the caller's scratch, reused from step to step.
template <class Sequences, class RankScores>
void score_rank_pairs(const Sequences& sequences, size_t dim, RankScores&& rank_scores, std::vector<float>& rows,
                      std::vector<float>& scores) {
  rows.clear();
  for (const auto& seq : sequences) {
    if (seq->embedding->pooling() != Pooling::Rank) continue;
    const std::vector<float> row = seq->embedding->kept_row();
    rows.insert(rows.end(), row.begin(), row.end());
  }
  if (rows.empty()) return;
  scores.resize(rows.size() / dim);
  rank_scores(rows.data(), int32_t(scores.size()), scores.data());
  size_t next = 0;
  for (const auto& seq : sequences) {
    if (seq->embedding->pooling() == Pooling::Rank) seq->embedding->set_score(scores[next++]);
  }
}

}  // namespace pagoda
