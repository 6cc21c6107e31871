#include "engine/request/embedding_pooler.h"

#include <cassert>
#include <cmath>

namespace pagoda {

EmbeddingPooler::EmbeddingPooler(Pooling pooling, bool normalize, int32_t prompt_len, int32_t dim, RankRow rank_row)
    : pooling_(pooling), rank_row_(rank_row), normalize_(normalize), prompt_len_(prompt_len), sum_(size_t(dim), 0.0) {
  assert(pooling != Pooling::Model);
}

int32_t EmbeddingPooler::kept_position() const {
  switch (pooling_) {
    case Pooling::Cls: return 0;
    case Pooling::Rank: return rank_row_ == RankRow::First ? 0 : prompt_len_ - 1;
    case Pooling::Last: return prompt_len_ - 1;
    case Pooling::Mean:
    case Pooling::Model: break;
  }
  return -1;
}

EmbeddingPooler::Rows EmbeddingPooler::rows_for(int32_t first, int32_t n) const {
  if (pooling_ == Pooling::Mean) return {true, false};
  // The first position: the whole first chunk rather than a flag for its first row (normed rows
  // cost dim floats each, next to the chunk's forward pass they are nothing). The last: the
  // chunk's last row, when the chunk ends the prompt.
  const int32_t kept = kept_position();
  if (kept == 0 && kept != prompt_len_ - 1) return {first == 0, false};
  return {false, first + n == prompt_len_};
}

void EmbeddingPooler::add(int32_t position, std::span<const float> row) {
  assert(row.size() == sum_.size());
  const bool wanted = pooling_ == Pooling::Mean ? position == pooled_ : position == kept_position() && pooled_ == 0;
  if (!wanted) return;
  // Summed in double, position by position: the same sum whatever the chunks were.
  for (size_t i = 0; i < sum_.size(); ++i) sum_[i] += double(row[i]);
  ++pooled_;
}

void EmbeddingPooler::set_score(float score) {
  assert(pooling_ == Pooling::Rank && pooled_ == 1);
  score_ = score;
}

bool EmbeddingPooler::complete() const {
  if (pooling_ == Pooling::Rank) return pooled_ == 1 && score_.has_value();
  return pooled_ == (pooling_ == Pooling::Mean ? prompt_len_ : 1);
}

std::vector<float> EmbeddingPooler::result() const {
  assert(complete());
  if (pooling_ == Pooling::Rank) return {*score_};  // a score, never normalized
  std::vector<double> v = sum_;
  if (pooling_ == Pooling::Mean) {
    for (double& x : v) x /= double(prompt_len_);
  }
  if (normalize_) {
    double norm = 0.0;
    for (double x : v) norm += x * x;
    norm = std::sqrt(norm);
    if (norm > 0.0) {
      for (double& x : v) x /= norm;
    }
  }
  return std::vector<float>(v.begin(), v.end());
}

}  // namespace pagoda
