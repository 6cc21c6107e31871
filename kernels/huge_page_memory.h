#pragma once
// Large buffers the kernels stream through — weights repacked once at load, the paged KV
// cache's arena — as an anonymous mapping of their own: zero-filled, 2 MiB-aligned, asking
// for transparent huge pages (MADV_HUGEPAGE, which Debian's default "madvise" mode grants).
// Filling such a buffer costs a page fault per 2 MiB rather than per 4 KiB, and reading it
// misses the TLB far less: a batched decode step gathers K/V rows from hundreds of MiB, and
// on a virtual machine with shadow page tables every 4 KiB page it touches is costly.

#include <cstddef>
#include <cstdint>
#include <memory>

namespace pagoda::kernels {

// The size of a transparent huge page on x86-64.
inline constexpr std::size_t kHugePageBytes = std::size_t(2) << 20;

struct HugePageMemoryFree {
  std::size_t bytes = 0;
  void operator()(uint8_t* p) const;
};
using HugePageMemory = std::unique_ptr<uint8_t[], HugePageMemoryFree>;

// `bytes` of zeroed memory (null for 0), committed by the OS as it is first written, or all at
// once when `populate`. Throws std::bad_alloc when the mapping fails.
HugePageMemory allocate_huge_page_memory(std::size_t bytes, bool populate = false);

}  // namespace pagoda::kernels
