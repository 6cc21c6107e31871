#pragma once
// Keeps a file mapping whose file is truncated under it from killing the process.
//
// Reading a page of a file mapping past the file's current end raises SIGBUS, and the kernels
// read weights straight from the mapping, so truncating a model file in place would take the
// whole server down at its next step. A MappingGuard registers a mapping in a fixed-size,
// process-wide table read by a SIGBUS handler (installed once, with sigaction). For a fault
// inside a registered range the handler maps anonymous zero pages over the whole range
// (MAP_FIXED, the same addresses), marks the range lost and returns: the faulting load runs
// again and reads zeros. The owner then sees lost() and fails its work instead of trusting
// what it computed. A fault anywhere else goes to the handler installed before ours (a
// sanitizer's, an application's), or to the default action, as if we were not there.
//
// When the table is full the mapping simply goes unguarded.

#include <cstddef>

namespace pagoda {

class MappingGuard {
 public:
  MappingGuard() = default;  // guards nothing
  // Guards the read-only mapping [begin, begin + size); begin is page-aligned (what mmap gave).
  static MappingGuard watch(const void* begin, size_t size) noexcept;

  MappingGuard(MappingGuard&& other) noexcept;
  MappingGuard& operator=(MappingGuard&& other) noexcept;
  MappingGuard(const MappingGuard&) = delete;
  MappingGuard& operator=(const MappingGuard&) = delete;
  ~MappingGuard();  // forget(); call it before the range is unmapped

  // Whether a fault replaced the range with zeros: its bytes are no longer the file's.
  bool lost() const noexcept;
  // Stops guarding the range (before munmap, so a later mapping at the same addresses is not
  // taken for this one).
  void forget() noexcept;

 private:
  explicit MappingGuard(int slot) : slot_(slot) {}
  int slot_ = -1;  // in the table, or -1
};

}  // namespace pagoda
