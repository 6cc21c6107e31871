#pragma once
// The factors of LoRA adapters as the fused multi-adapter kernel (kernels/lora_sgmv) reads
// them: LoraFactors, one projection of one adapter, and LoraFactorSet, the memory that holds
// many of them — an adapter's every target — back to back.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/huge_page_memory.h"

namespace pagoda::kernels {

// How a LoraFactors stores its values. Factors read from a file of 16-bit floats stay 16-bit
// (half the memory traffic of f32 for the same values) and are widened exactly in registers.
enum class LoraElement : int { F32, F16, BF16 };

// One adapter's factors of one projection: A as [rank][n_in] (each shrink dot product reads
// one contiguous row) and B transposed, [rank][n_out] (the expand runs along the output
// columns), both in one block of `element`s; and the scale, applied to the rank-wide
// intermediate so that B keeps the file's values. A view of memory a LoraFactorSet owns.
class LoraFactors {
 public:
  LoraFactors() = default;

  int rank() const { return rank_; }
  int n_in() const { return n_in_; }
  int n_out() const { return n_out_; }
  float scale() const { return scale_; }
  LoraElement element() const { return element_; }
  std::size_t element_bytes() const { return element_ == LoraElement::F32 ? 4 : 2; }
  // [rank][n_in] then [rank][n_out] of element(): floats, or IEEE halves or bfloat16s as uint16_t.
  const void* a() const { return data_; }
  const void* b_t() const { return data_ + std::size_t(rank_) * n_in_ * element_bytes(); }
  // The whole block, A then Bᵀ.
  std::size_t bytes() const { return std::size_t(rank_) * (std::size_t(n_in_) + n_out_) * element_bytes(); }

 private:
  friend class LoraFactorSet;

  int rank_ = 0;
  int n_in_ = 0;
  int n_out_ = 0;
  float scale_ = 1.0f;
  LoraElement element_ = LoraElement::F32;
  const std::byte* data_ = nullptr;
};

// One projection's factors as an adapter file holds them: a is [rank][n_in] and b is
// [n_out][rank], row-major, as in a llama.cpp adapter.
struct LoraFactorSource {
  const float* a = nullptr;
  const float* b = nullptr;
  int rank = 0;
  int n_in = 0;
  int n_out = 0;
  float scale = 1.0f;
  LoraElement element = LoraElement::F32;
};

// Factors packed back to back, in the order given, into one block of memory on transparent
// huge pages. A decode step with many adapters reads every one of their factors once, a few
// KiB each, from memory that left the caches since the last step: one stream over whole huge
// pages keeps that read near the machine's bandwidth, where small pages and scattered
// allocations cost a TLB miss and a cold hardware prefetcher per few KiB. A set of at least
// half a huge page is rounded up to whole ones (at most one huge page of slack); a smaller one
// keeps small pages. Immutable once built; moving it keeps every LoraFactors valid.
class LoraFactorSet {
 public:
  LoraFactorSet() = default;
  // Values are rounded to each source's element (to nearest even): exact for values that were
  // read from a tensor of that type.
  explicit LoraFactorSet(std::span<const LoraFactorSource> sources);

  std::size_t size() const { return factors_.size(); }
  const LoraFactors& operator[](std::size_t i) const { return factors_[i]; }

 private:
  HugePageMemory memory_;
  std::vector<LoraFactors> factors_;
};

}  // namespace pagoda::kernels
