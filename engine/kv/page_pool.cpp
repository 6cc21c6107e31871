#include "engine/kv/page_pool.h"

#include <sys/mman.h>

#include <string>

#include "pagoda/error.h"

namespace pagoda {

void PagePool::FreeArena::operator()(float* p) const { munmap(p, bytes); }

PagePool::PagePool(const KvLayout& layout, int32_t n_pages) : layout_(layout), capacity_(n_pages) {
  if (n_pages <= 0) throw Error("KV cache: the page count must be positive, got " + std::to_string(n_pages));
  if (layout.tokens_per_page <= 0) throw Error("KV cache: tokens per page must be positive");
  // Anonymous memory: page-aligned, zero-filled (a read of an unwritten slot is deterministic),
  // and committed by the OS only as pages are first written, so start-up is instant.
  const size_t bytes = layout.bytes_per_page() * size_t(n_pages);
  void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) {
    throw Error("KV cache: cannot map " + std::to_string(bytes) + " bytes for " + std::to_string(n_pages) + " pages");
  }
  arena_ = std::unique_ptr<float[], FreeArena>(static_cast<float*>(memory), FreeArena{bytes});
  free_list_.reserve(n_pages);
  for (int32_t p = n_pages - 1; p >= 0; --p) free_list_.push_back(p);
  ref_counts_.assign(n_pages, 0);
}

int32_t PagePool::pages_for_bytes(const KvLayout& layout, size_t bytes) {
  return int32_t(std::min<size_t>(bytes / layout.bytes_per_page(), INT32_MAX));
}

std::optional<int32_t> PagePool::allocate() {
  if (free_list_.empty()) return std::nullopt;
  const int32_t page = free_list_.back();
  free_list_.pop_back();
  ref_counts_[page] = 1;
  return page;
}

bool PagePool::allocate(int32_t count, std::vector<int32_t>& out) {
  if (count < 0 || count > free_pages()) return false;
  for (int32_t i = 0; i < count; ++i) out.push_back(*allocate());
  return true;
}

void PagePool::retain(int32_t page) {
  if (page < 0 || page >= capacity_ || ref_counts_[page] == 0) {
    throw Error("KV cache: retain of page " + std::to_string(page) + ", which is not allocated");
  }
  ++ref_counts_[page];
}

void PagePool::release(int32_t page) {
  if (page < 0 || page >= capacity_ || ref_counts_[page] == 0) {
    throw Error("KV cache: release of page " + std::to_string(page) + ", which is not allocated");
  }
  if (--ref_counts_[page] == 0) free_list_.push_back(page);
}

void PagePool::release(std::span<const int32_t> pages) {
  for (int32_t page : pages) release(page);
}

}  // namespace pagoda
