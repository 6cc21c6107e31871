#include "kernels/huge_page_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <new>

namespace pagoda::kernels {

namespace {

std::size_t round_up(std::size_t v, std::size_t to) { return (v + to - 1) / to * to; }

}  // namespace

void HugePageMemoryFree::operator()(uint8_t* p) const {
  if (p) munmap(p, bytes);
}

HugePageMemory allocate_huge_page_memory(std::size_t bytes, bool populate) {
  if (bytes == 0) return {};
  const std::size_t page = std::size_t(sysconf(_SC_PAGESIZE));
  const std::size_t size = round_up(bytes, page);
  if (size < kHugePageBytes) {
    const int flags = MAP_PRIVATE | MAP_ANONYMOUS | (populate ? MAP_POPULATE : 0);
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return HugePageMemory(static_cast<uint8_t*>(p), HugePageMemoryFree{size});
  }
  // Over-map by a huge page and trim, so the buffer starts on a 2 MiB boundary.
  const std::size_t mapped = size + kHugePageBytes;
  void* raw = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto begin = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t start = round_up(begin, kHugePageBytes);
  if (start > begin) munmap(raw, start - begin);
  const uintptr_t end = begin + mapped;
  if (end > start + size) munmap(reinterpret_cast<void*>(start + size), end - (start + size));
  // Advice only: without huge pages the buffer simply has small ones.
  madvise(reinterpret_cast<void*>(start), size, MADV_HUGEPAGE);
  HugePageMemory memory(reinterpret_cast<uint8_t*>(start), HugePageMemoryFree{size});
  // After the advice, so the pages committed are huge ones; kernels before 5.14 lack
  // MADV_POPULATE_WRITE, and there a write per small page commits the same memory.
  if (populate && madvise(memory.get(), size, MADV_POPULATE_WRITE) != 0 && errno == EINVAL) {
    for (std::size_t offset = 0; offset < size; offset += page)
      reinterpret_cast<volatile uint8_t*>(memory.get())[offset] = 0;
  }
  return memory;
}

}  // namespace pagoda::kernels
