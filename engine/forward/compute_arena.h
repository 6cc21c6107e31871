#pragma once
// The thread count of a runner's task arena.

#include <tbb/task_arena.h>

namespace pagoda {

#if defined(__SANITIZE_THREAD__)
// Debian's oneTBB is not built with ThreadSanitizer, so TSan cannot see the synchronization
// inside its scheduler and would flag every hand-off between workers. Under TSan a forward
// pass stays on the calling thread; what TSan checks is then the actor layer, which is ours.
inline constexpr int kMaxComputeThreads = 1;
#else
inline constexpr int kMaxComputeThreads = 0;  // no cap
#endif

// `requested` threads (0: all cores), within kMaxComputeThreads.
inline int compute_arena_threads(int requested) {
  if (kMaxComputeThreads > 0) return kMaxComputeThreads;
  return requested > 0 ? requested : tbb::task_arena::automatic;
}

}  // namespace pagoda
