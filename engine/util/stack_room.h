#pragma once
// How much of the current thread's stack is left, for recursive readers of user input (the
// JSON Schema compiler, the GBNF and pattern readers). Their nesting limits keep them within a
// few hundred KB in Release, but a frame's size depends on the build (AddressSanitizer makes
// the schema compiler's levels 8 to 10 times larger) and a thread's stack on whoever made the
// thread: checking the room left turns what would be a stack overflow into a pagoda::Error.

#include <cstddef>

namespace pagoda {

// Room a recursive reader keeps free below its deepest check, for the non-recursive work it
// does there (a dump() of a value, a pattern, the grammar text).
inline constexpr size_t kStackReserve = size_t(64) << 10;

// Bytes of this thread's stack below the caller's frame; SIZE_MAX when the bounds are unknown.
size_t stack_room();

// Whether less than kStackReserve of the stack is left.
inline bool stack_nearly_full() { return stack_room() < kStackReserve; }

}  // namespace pagoda
