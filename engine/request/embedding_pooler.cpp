#include "engine/request/embedding_pooler.h"

#include <cassert>
#include <cmath>

namespace pagoda {

EmbeddingPooler::EmbeddingPooler(Pooling pooling, bool normalize, int32_t prompt_len, int32_t dim)
    : pooling_(pooling), normalize_(normalize), prompt_len_(prompt_len), sum_(size_t(dim), 0.0) {
  assert(pooling != Pooling::Model);
}

EmbeddingPooler::Rows EmbeddingPooler::rows_for(int32_t first, int32_t n) const {
  switch (pooling_) {
    case Pooling::Mean: return {true, false};
    // The whole first chunk rather than a flag for its first row: normed rows cost dim floats
    // each, next to the chunk's forward pass they are nothing.
    case Pooling::Cls:
    case Pooling::Rank: return {first == 0, false};
    case Pooling::Last: return {false, first + n == prompt_len_};
    case Pooling::Model: break;
  }
  return {};
}

void EmbeddingPooler::add(int32_t position, std::span<const float> row) {
  assert(row.size() == sum_.size());
  const bool wanted = pooling_ == Pooling::Mean                               ? position == pooled_
                      : pooling_ == Pooling::Cls || pooling_ == Pooling::Rank ? position == 0 && pooled_ == 0
                      : pooling_ == Pooling::Last ? position == prompt_len_ - 1 && pooled_ == 0
                                                  : false;
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
