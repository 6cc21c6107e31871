#include "kernels/lora_factors.h"

#include <cassert>

#include "kernels/half.h"

namespace pagoda::kernels {

namespace {

constexpr std::size_t kCacheLine = 64;

std::size_t round_up(std::size_t v, std::size_t to) { return (v + to - 1) / to * to; }

std::size_t block_bytes(const LoraFactorSource& s) {
  return std::size_t(s.rank) * (std::size_t(s.n_in) + s.n_out) * (s.element == LoraElement::F32 ? 4 : 2);
}

// Writes A, then B transposed, as `element`s from dst.
void pack(const LoraFactorSource& s, std::byte* dst) {
  const std::size_t a_count = std::size_t(s.rank) * s.n_in;
  auto put = [&](std::size_t i, float v) {
    switch (s.element) {
      case LoraElement::F32: reinterpret_cast<float*>(dst)[i] = v; break;
      case LoraElement::F16: reinterpret_cast<uint16_t*>(dst)[i] = f32_to_f16(v); break;
      case LoraElement::BF16: reinterpret_cast<uint16_t*>(dst)[i] = f32_to_bf16(v); break;
    }
  };
  for (std::size_t i = 0; i < a_count; ++i) put(i, s.a[i]);
  for (int j = 0; j < s.rank; ++j)
    for (int n = 0; n < s.n_out; ++n) put(a_count + std::size_t(j) * s.n_out + n, s.b[std::size_t(n) * s.rank + j]);
}

}  // namespace

LoraFactorSet::LoraFactorSet(std::span<const LoraFactorSource> sources) {
  // Each block starts on a cache line of its own.
  std::size_t bytes = 0;
  for (const LoraFactorSource& s : sources) {
    assert(s.rank > 0 && s.n_in > 0 && s.n_out > 0);
    bytes += round_up(block_bytes(s), kCacheLine);
  }
  memory_ = allocate_huge_page_memory(bytes >= kHugePageBytes / 2 ? round_up(bytes, kHugePageBytes) : bytes);
  factors_.reserve(sources.size());
  std::size_t offset = 0;
  for (const LoraFactorSource& s : sources) {
    std::byte* data = reinterpret_cast<std::byte*>(memory_.get()) + offset;
    pack(s, data);
    LoraFactors f;
    f.rank_ = s.rank;
    f.n_in_ = s.n_in;
    f.n_out_ = s.n_out;
    f.scale_ = s.scale;
    f.element_ = s.element;
    f.data_ = data;
    factors_.push_back(f);
    offset += round_up(block_bytes(s), kCacheLine);
  }
}

}  // namespace pagoda::kernels
