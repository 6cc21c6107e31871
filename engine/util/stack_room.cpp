// The stack's lowest address comes from pthread_getattr_np once per thread (for the main
// thread glibc derives it from the stack rlimit, reading /proc/self/maps), then each call
// compares it with the frame address: cheap enough for every level of a recursion.

#include "engine/util/stack_room.h"

#include <pthread.h>

#include <cstdint>

namespace pagoda {
namespace {

uintptr_t stack_low() {
  thread_local const uintptr_t low = [] {
    uintptr_t found = 0;
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      void* addr = nullptr;
      size_t size = 0;
      if (pthread_attr_getstack(&attr, &addr, &size) == 0) found = reinterpret_cast<uintptr_t>(addr);
      pthread_attr_destroy(&attr);
    }
    return found;
  }();
  return low;
}

}  // namespace

size_t stack_room() {
  const uintptr_t low = stack_low();
  const auto here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  return low == 0 || here < low ? SIZE_MAX : size_t(here - low);
}

}  // namespace pagoda
