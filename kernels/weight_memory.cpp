#include "kernels/weight_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <new>

namespace pagoda::kernels {

namespace {

constexpr std::size_t kHugePage = std::size_t(2) << 20;

std::size_t round_up(std::size_t v, std::size_t to) { return (v + to - 1) / to * to; }

}  // namespace

void WeightMemoryFree::operator()(uint8_t* p) const {
  if (p) munmap(p, bytes);
}

WeightMemory allocate_weight_memory(std::size_t bytes) {
  if (bytes == 0) return {};
  const std::size_t page = std::size_t(sysconf(_SC_PAGESIZE));
  const std::size_t size = round_up(bytes, page);
  if (size < kHugePage) {
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return WeightMemory(static_cast<uint8_t*>(p), WeightMemoryFree{size});
  }
  // Over-map by a huge page and trim, so the buffer starts on a 2 MiB boundary.
  const std::size_t mapped = size + kHugePage;
  void* raw = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto begin = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t start = round_up(begin, kHugePage);
  if (start > begin) munmap(raw, start - begin);
  const uintptr_t end = begin + mapped;
  if (end > start + size) munmap(reinterpret_cast<void*>(start + size), end - (start + size));
  // Advice only: without huge pages the buffer simply has small ones.
  madvise(reinterpret_cast<void*>(start), size, MADV_HUGEPAGE);
  return WeightMemory(reinterpret_cast<uint8_t*>(start), WeightMemoryFree{size});
}

}  // namespace pagoda::kernels
