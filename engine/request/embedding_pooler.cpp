#include "engine/request/embedding_pooler.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace pagoda {

namespace {

// `v` scaled to unit L2 length, in double; a zero vector stays zero.
std::vector<float> normalized(const std::vector<double>& v) {
  double norm = 0.0;
  for (double x : v) norm += x * x;
  norm = std::sqrt(norm);
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = float(norm > 0.0 ? v[i] / norm : v[i]);
  return out;
}

}  // namespace

EmbeddingPooler::EmbeddingPooler(Pooling pooling, bool normalize, int32_t prompt_len, int32_t dim, RankRow rank_row)
    : pooling_(pooling),
      rank_row_(rank_row),
      normalize_(normalize),
      prompt_len_(prompt_len),
      dim_(dim),
      sum_(pooling == Pooling::None ? 0 : size_t(dim), 0.0) {
  assert(pooling != Pooling::Model);
}

int32_t EmbeddingPooler::kept_position() const {
  switch (pooling_) {
    case Pooling::Cls: return 0;
    case Pooling::Rank: return rank_row_ == RankRow::First ? 0 : prompt_len_ - 1;
    case Pooling::Last: return prompt_len_ - 1;
    case Pooling::Mean:
    case Pooling::None:
    case Pooling::Model: break;
  }
  return -1;
}

EmbeddingPooler::Rows EmbeddingPooler::rows_for(int32_t first, int32_t n) const {
  if (pooling_ == Pooling::Mean || pooling_ == Pooling::None) return {true, false};
  // The first position: the whole first chunk rather than a flag for its first row (normed rows
  // cost dim floats each, next to the chunk's forward pass they are nothing). The last: the
  // chunk's last row, when the chunk ends the prompt.
  const int32_t kept = kept_position();
  if (kept == 0 && kept != prompt_len_ - 1) return {first == 0, false};
  return {false, first + n == prompt_len_};
}

void EmbeddingPooler::add(int32_t position, std::span<const float> row) {
  assert(row.size() == size_t(dim_));
  const bool every = pooling_ == Pooling::Mean || pooling_ == Pooling::None;
  const bool wanted = every ? position == pooled_ : position == kept_position() && pooled_ == 0;
  if (!wanted) return;
  if (pooling_ == Pooling::None) {
    rows_.insert(rows_.end(), row.begin(), row.end());
    ++pooled_;
    return;
  }
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
  return pooled_ == (pooling_ == Pooling::Mean || pooling_ == Pooling::None ? prompt_len_ : 1);
}

std::vector<float> EmbeddingPooler::result() const {
  assert(complete());
  if (pooling_ == Pooling::Rank) return {*score_};  // a score, never normalized
  if (pooling_ == Pooling::None) {
    std::vector<float> out = rows_;
    if (normalize_) {
      for (size_t r = 0; r < out.size(); r += size_t(dim_)) {
        const std::vector<double> row(out.begin() + ptrdiff_t(r), out.begin() + ptrdiff_t(r) + dim_);
        const std::vector<float> unit = normalized(row);
        std::copy(unit.begin(), unit.end(), out.begin() + ptrdiff_t(r));
      }
    }
    return out;
  }
  std::vector<double> v = sum_;
  if (pooling_ == Pooling::Mean) {
    for (double& x : v) x /= double(prompt_len_);
  }
  if (!normalize_) return std::vector<float>(v.begin(), v.end());
  return normalized(v);
}

}  // namespace pagoda
