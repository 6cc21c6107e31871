#pragma once
// Internal to the projector loader: a projector file's clip.* metadata read into a VisionConfig
// (its projector type, its hyperparameters with llama.cpp's defaults), the bounds that keep a
// hostile file's numbers from making the loader allocate much before it fails, and the checks
// that the numbers fit together.

#include <cstdint>
#include <string>

#include "engine/gguf/gguf.h"
#include "engine/vision/vision_model.h"

namespace pagoda {

// Far above any released vision encoder (SigLIP-so400m: dim 1152, 27 blocks; InternViT-6B:
// dim 3200, 45 blocks), far below what would take gigabytes of bookkeeping.
inline constexpr int32_t kMaxVisionLayers = 256;
inline constexpr int32_t kMaxVisionDim = 32768;   // dim, FFN width, projector widths
inline constexpr int32_t kMaxVisionSide = 16384;  // image_size, window_size, in pixels
inline constexpr int32_t kMaxPatchSize = 256;
inline constexpr int32_t kMaxSpatialMerge = 8;

// What the metadata says, before the tensors settle the FFN's and the projector's widths.
struct ProjectorMetadata {
  VisionConfig config;  // ffn_dim and projection_dim are 0 here
  // clip.vision.feed_forward_length when it describes the FFN, else 0: Qwen2-VL's converters
  // write 0 (examples/llava) or the language model's width (convert_hf_to_gguf.py) there.
  int32_t ffn_dim_key = 0;
  // clip.vision.projection_dim when it is the width the projector outputs, else 0: files of
  // examples/llava's LLaVA converter (clip.has_llava_projector) hold CLIP's own projection width.
  int32_t projection_dim_key = 0;
  // Written by examples/llava's converters (clip.has_llava_projector or clip.has_qwen2vl_merger
  // present), which named the FFN's matrices the wrong way round.
  bool legacy = false;
};

// Reads the projector type and hyperparameters. Throws pagoda::Error naming the file: a language
// model's GGUF, no vision encoder, an unsupported projector type, a missing key, a number out of
// bounds or inconsistent with the others.
ProjectorMetadata read_projector_metadata(const GgufFile& f);

// Throws pagoda::Error naming `path` unless the widths the tensors gave are in bounds.
void check_projector_widths(const VisionConfig& c, const std::string& path);

}  // namespace pagoda
