#include "engine/model/weight_tensor.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

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

void WeightTensor::release_pages(const void* first, std::size_t bytes) const {
  if (mapped) discard_pages(first, bytes);
}

void WeightTensor::discard_pages(const void* first, std::size_t bytes) const {
  if (data == nullptr) return;
  static const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(first) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(first) + bytes) / page * page;
  // Advice only: on failure the pages simply stay resident.
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace pagoda
