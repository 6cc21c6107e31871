#pragma once
// Random-weight vision projector files (mmproj GGUF, as llama.cpp reads them) for tests and
// benchmarks: LLaVA's MLP over a CLIP ViT, Gemma 3's SigLIP with its pooling projector,
// Qwen2-VL's and Qwen2.5-VL's ViTs with their 2x2 mergers; deterministic from a seed, in the
// layout of llama.cpp's older examples/llava converters or of today's convert_hf_to_gguf.py.
// Written tensor by tensor straight to the file, so a real-size encoder needs one tensor's memory.

#include <cstdint>
#include <string>
#include <vector>

#include "engine/gguf/ggml_types.h"
#include "engine/vision/vision_model.h"

namespace pagoda {

enum class ProjectorLayout {
  // examples/llava's convert_image_encoder_to_gguf.py (LLaVA) and qwen2_vl_surgery.py
  // (Qwen2-VL): clip.has_llava_projector / clip.has_qwen2vl_merger, the FFN's matrices named the
  // wrong way round, every key llama.cpp's 2025-02 clip_model_load requires. Those two families only.
  Legacy,
  // tools/mtmd's names and keys, as convert_hf_to_gguf.py writes them; every family.
  Current,
};

struct VisionSynthSpec {
  // The family (config.projector) and shape: image_size, patch_size, dim, ffn_dim, n_heads,
  // n_layers, eps, image_mean, image_std, projection_dim (LLaVA's MLP is projection_dim wide
  // inside too, as LLaVA-1.5's), tokens_per_image (Gemma 3: a square whose side divides the patch
  // grid's), spatial_merge (Qwen), window_size and full_attention_layers (Qwen2.5-VL: every k-th
  // block, as the files' n_wa_pattern says), min_pixels and max_pixels (Qwen, written when set),
  // layers_run (LLaVA: written as clip.vision.feature_layer, Current layout only, when it is not
  // n_layers - 1). The activation follows from the family.
  VisionConfig config;
  ProjectorLayout layout = ProjectorLayout::Current;
  uint64_t seed = 1;
  // Storage of the matrices, the conv kernels and the position table: F32 or F16. Norms, biases
  // and the class embedding stay F32, as llama.cpp's converters write them.
  GgmlType type = GgmlType::F32;
};

// A named shape of one family: "tiny" (image 56 or 112, patch 14, dim 64, 2 to 4 blocks, FFN
// 128, projecting to 96: unit tests) or "full", the real encoder's (LLaVA-1.5's CLIP ViT-L/336,
// Gemma 3 4B's SigLIP, Qwen2-VL-2B's, Qwen2.5-VL-3B's).
struct VisionSynthPreset {
  std::string name;
  std::string description;
  VisionConfig config;
};

// Every preset, each family's tiny one before its full one.
const std::vector<VisionSynthPreset>& vision_synth_presets();
// Throws pagoda::Error, listing the known names, for a family without a preset of that name.
const VisionSynthPreset& find_vision_synth_preset(ProjectorType family, const std::string& name);

// Writes the projector to `path` and returns the config load_projector reads back from it
// (activation, layers_run, tokens_per_image, ... as the file states them). Each tensor's values
// depend only on the seed and the tensor (not on the layout, nor on the storage type but for its
// rounding), so the Legacy and Current files of one seed hold the same encoder. Throws
// pagoda::Error on a shape the family's files cannot state, a Legacy file of a family that layout
// lacks, a storage type other than F32 or F16, or an I/O failure.
VisionConfig write_synth_projector(const std::string& path, const VisionSynthSpec& spec);

}  // namespace pagoda
