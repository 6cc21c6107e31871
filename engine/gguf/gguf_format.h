#pragma once
// Layout rules of a GGUF file that the reader (gguf_parser.cpp) and the writer
// (gguf_writer.cpp) share, so that every file the writer makes reads back.

#include <bit>
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/gguf/gguf_value.h"
#include "pagoda/error.h"

namespace pagoda {

inline constexpr std::string_view kGgufMagic = "GGUF";  // the first 4 bytes
inline constexpr std::string_view kGgufAlignmentKey = "general.alignment";

// Zero bytes that bring `size` up to a multiple of `alignment`.
constexpr uint64_t gguf_padding(uint64_t size, uint64_t alignment) {
  return (alignment - size % alignment) % alignment;
}

// The alignment of the tensor data that the value of general.alignment sets (nullptr when the
// key is absent). Throws pagoda::Error "<path>: key 'general.alignment': <problem>" unless it
// is a UINT32 power of two.
inline uint64_t gguf_alignment(const GgufValue* value, const std::string& path) {
  if (!value) return 32;
  const std::string at = path + ": key '" + std::string(kGgufAlignmentKey) + "': ";
  const uint32_t* a = value->get_if<uint32_t>();
  if (!a) throw Error(at + "has type " + gguf_type_name(value->type()) + ", expected UINT32");
  if (!std::has_single_bit(*a)) throw Error(at + std::to_string(*a) + " is not a power of two");
  return *a;
}

}  // namespace pagoda
