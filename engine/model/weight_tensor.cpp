#include "engine/model/weight_tensor.h"

namespace pagoda {

std::span<const std::byte> WeightTensor::row(int64_t r) const {
  const uint64_t bytes = row_bytes();
  return {data + uint64_t(r) * bytes, bytes};
}

void WeightTensor::dequantize_rows(int64_t first, int64_t count, float* out) const {
  const uint64_t bytes = row_bytes();
  dequantize(type, {data + uint64_t(first) * bytes, uint64_t(count) * bytes}, {out, size_t(count * cols)});
}

std::vector<float> WeightTensor::to_f32() const {
  std::vector<float> out(size_t(rows) * size_t(cols));
  if (!out.empty()) dequantize_rows(0, rows, out.data());
  return out;
}

}  // namespace pagoda
