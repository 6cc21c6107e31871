#include "engine/kv/tier_fingerprint.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <xxhash.h>

#include <algorithm>
#include <vector>

namespace pagoda {

namespace {

// Bumped whenever a change to pagoda makes some KV page's bits differ for the same model,
// layout and ISA (a kernel's reduction order, the forward pass), so old page files stop matching.
constexpr uint64_t kComputeVersion = 1;
constexpr size_t kChunk = size_t(64) << 20;

}  // namespace

PageHash tier_fingerprint(std::span<const std::byte> model_file, std::string_view kernels) {
  const size_t chunks = (model_file.size() + kChunk - 1) / kChunk;
  std::vector<uint64_t> words(chunks + 3);
  tbb::parallel_for(tbb::blocked_range<size_t>(0, chunks), [&](const tbb::blocked_range<size_t>& r) {
    for (size_t c = r.begin(); c < r.end(); ++c) {
      const size_t at = c * kChunk;
      words[c] = XXH3_64bits(model_file.data() + at, std::min(kChunk, model_file.size() - at));
    }
  });
  words[chunks] = model_file.size();
  words[chunks + 1] = kComputeVersion;
  words[chunks + 2] = XXH3_64bits(kernels.data(), kernels.size());
  const XXH128_hash_t h = XXH3_128bits(words.data(), words.size() * sizeof(uint64_t));
  return {h.low64, h.high64};
}

}  // namespace pagoda
