#include "engine/gguf/mapping_guard.h"

#include <signal.h>
#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <mutex>
#include <utility>

namespace pagoda {

namespace {

// The table the handler reads: only lock-free atomics, so reading it in a signal handler is
// safe whatever thread was interrupted, even one inside watch() or forget().
enum SlotState : int { kFree, kClaimed, kActive };

struct Slot {
  std::atomic<int> state{kFree};
  std::atomic<uintptr_t> begin{0};
  std::atomic<size_t> size{0};
  std::atomic<bool> lost{false};
};
static_assert(std::atomic<uintptr_t>::is_always_lock_free && std::atomic<size_t>::is_always_lock_free &&
              std::atomic<int>::is_always_lock_free && std::atomic<bool>::is_always_lock_free);

// Mappings guarded at once: one per loaded model, plus the short-lived ones of files being
// parsed (adapters, the chat template).
constexpr int kSlots = 64;
Slot g_slots[kSlots];

struct sigaction g_previous;  // the SIGBUS disposition before ours; written once, before install

// Hands a fault that is not ours to whoever had SIGBUS before us.
void chain(int sig, siginfo_t* info, void* context) {
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction) return g_previous.sa_sigaction(sig, info, context);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    return g_previous.sa_handler(sig);
  }
  // The default action (a hardware fault cannot be ignored): restore it; returning re-runs the
  // faulting load, which faults again and ends the process as it would have without us. A
  // SIGBUS sent with kill() is raised again, pending until this handler returns.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(SIGBUS, &dfl, nullptr);
  if (info->si_code <= 0) raise(sig);
}

void on_sigbus(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  // si_addr is meaningful only for faults the kernel raised (si_code > 0), not kill().
  if (info->si_code > 0) {
    const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
    for (Slot& slot : g_slots) {
      if (slot.state.load(std::memory_order_acquire) != kActive) continue;
      const uintptr_t begin = slot.begin.load(std::memory_order_relaxed);
      const size_t size = slot.size.load(std::memory_order_relaxed);
      if (addr - begin >= size) continue;
      // Zero pages over the whole range, at the same addresses: a plain syscall. Other threads
      // faulting in the range at once each do the same; the result is the same zeros.
      void* zeros =
          mmap(reinterpret_cast<void*>(begin), size, PROT_READ, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (zeros == MAP_FAILED) break;
      slot.lost.store(true, std::memory_order_release);
      errno = saved_errno;
      return;
    }
  }
  errno = saved_errno;
  chain(sig, info, context);
}

void install_handler() {
  struct sigaction ours {};
  ours.sa_sigaction = on_sigbus;
  ours.sa_flags = SA_SIGINFO;
  sigemptyset(&ours.sa_mask);
  sigaction(SIGBUS, &ours, &g_previous);
}

}  // namespace

MappingGuard MappingGuard::watch(const void* begin, size_t size) noexcept {
  static std::once_flag installed;
  std::call_once(installed, install_handler);
  for (int i = 0; i < kSlots; ++i) {
    Slot& slot = g_slots[i];
    int expected = kFree;
    if (!slot.state.compare_exchange_strong(expected, kClaimed, std::memory_order_acquire)) continue;
    slot.begin.store(reinterpret_cast<uintptr_t>(begin), std::memory_order_relaxed);
    slot.size.store(size, std::memory_order_relaxed);
    slot.lost.store(false, std::memory_order_relaxed);
    slot.state.store(kActive, std::memory_order_release);
    return MappingGuard(i);
  }
  return MappingGuard();
}

MappingGuard::MappingGuard(MappingGuard&& other) noexcept : slot_(std::exchange(other.slot_, -1)) {}

MappingGuard& MappingGuard::operator=(MappingGuard&& other) noexcept {
  if (this != &other) {
    forget();
    slot_ = std::exchange(other.slot_, -1);
  }
  return *this;
}

MappingGuard::~MappingGuard() { forget(); }

bool MappingGuard::lost() const noexcept { return slot_ >= 0 && g_slots[slot_].lost.load(std::memory_order_acquire); }

void MappingGuard::forget() noexcept {
  if (slot_ < 0) return;
  g_slots[slot_].state.store(kFree, std::memory_order_release);
  slot_ = -1;
}

}  // namespace pagoda
