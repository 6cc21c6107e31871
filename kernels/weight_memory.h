#pragma once
// Memory for weights repacked once at load and then only read by the kernels: an anonymous
// mapping of its own, zero-filled, asking for transparent huge pages (MADV_HUGEPAGE, which
// Debian's default "madvise" mode grants), so filling it costs a page fault per 2 MiB rather
// than per 4 KiB and streaming it through decode misses the TLB less.

#include <cstddef>
#include <cstdint>
#include <memory>

namespace pagoda::kernels {

struct WeightMemoryFree {
  std::size_t bytes = 0;
  void operator()(uint8_t* p) const;
};
using WeightMemory = std::unique_ptr<uint8_t[], WeightMemoryFree>;

// `bytes` of zeroed memory (null for 0). Throws std::bad_alloc when the mapping fails.
WeightMemory allocate_weight_memory(std::size_t bytes);

}  // namespace pagoda::kernels
