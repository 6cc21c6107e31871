#include "engine/kv/tier_fingerprint.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <xxhash.h>

#include <algorithm>
#include <vector>

namespace pagoda {

namespace {

// Bumped whenever a change to pagoda makes some KV page's bits differ for the same model,
// layout and ISA (a kernel's reduction order, the forward pass or vision encoder), so old page
// files stop matching.
constexpr uint64_t kComputeVersion = 1;
constexpr size_t kChunk = size_t(64) << 20;

// XXH3-64 of each chunk, hashed in parallel (a model is gigabytes).
std::vector<uint64_t> chunk_hashes(std::span<const std::byte> contents) {
  const size_t chunks = (contents.size() + kChunk - 1) / kChunk;
  std::vector<uint64_t> words(chunks);
  tbb::parallel_for(tbb::blocked_range<size_t>(0, chunks), [&](const tbb::blocked_range<size_t>& r) {
    for (size_t c = r.begin(); c < r.end(); ++c) {
      const size_t at = c * kChunk;
      words[c] = XXH3_64bits(contents.data() + at, std::min(kChunk, contents.size() - at));
    }
  });
  return words;
}

}  // namespace

PageHash tier_fingerprint(std::span<const std::byte> model_file, std::string_view kernels) {
  std::vector<uint64_t> words = chunk_hashes(model_file);
  words.push_back(model_file.size());
  words.push_back(kComputeVersion);
  words.push_back(XXH3_64bits(kernels.data(), kernels.size()));
  const XXH128_hash_t h = XXH3_128bits(words.data(), words.size() * sizeof(uint64_t));
  return {h.low64, h.high64};
}

uint64_t contents_hash(std::span<const std::byte> contents) {
  std::vector<uint64_t> words = chunk_hashes(contents);
  words.push_back(contents.size());
  return XXH3_64bits(words.data(), words.size() * sizeof(uint64_t));
}

}  // namespace pagoda
