#pragma once
// The disk tier's fingerprint of an engine: what, besides the prefix hash chain (which covers
// the KV layout and type, the adapter, the tokens, and the images with their projector file's
// contents_hash), decides a KV page's bits — the model file's whole contents (weights,
// tokenizer, metadata) and the kernels that compute with them (their ISA, and the page file
// format's version). Two engines share page files only when their fingerprints are equal.

#include <cstdint>
#include <span>
#include <string_view>

#include "engine/kv/prefix_cache.h"

namespace pagoda {

// XXH3 over `model_file` (in parallel chunks: a model is gigabytes) and `kernels` (the active
// ISA's name).
PageHash tier_fingerprint(std::span<const std::byte> model_file, std::string_view kernels);

// XXH3 over `contents` (in the same parallel chunks) and their size: a file's identity, for
// keys of what is computed from it (a vision projector's: VisionModel::fingerprint).
uint64_t contents_hash(std::span<const std::byte> contents);

}  // namespace pagoda
