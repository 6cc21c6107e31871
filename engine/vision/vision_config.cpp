// A projector file's clip.* metadata, as llama.cpp reads it (tools/mtmd/clip.cpp, and the older
// examples/llava/clip.cpp for files its converters wrote), into a VisionConfig.

#include "engine/vision/vision_config.h"

#include <cmath>

#include "pagoda/error.h"

namespace pagoda {

const char* projector_type_name(ProjectorType type) {
  switch (type) {
    case ProjectorType::LlavaMlp: return "mlp";
    case ProjectorType::Gemma3: return "gemma3";
    case ProjectorType::Qwen2VL: return "qwen2vl_merger";
    case ProjectorType::Qwen25VL: return "qwen2.5vl_merger";
  }
  return "unknown";
}

namespace {

constexpr const char* kSupported = "supported: mlp, gemma3, qwen2vl_merger, qwen2.5vl_merger";

bool is_qwen(ProjectorType t) { return t == ProjectorType::Qwen2VL || t == ProjectorType::Qwen25VL; }

// A language model's GGUF names its architecture (llama.cpp writes "clip" for projectors).
void refuse_language_model(const GgufFile& f) {
  const std::optional<std::string> arch = f.get_string_opt("general.architecture");
  if ((arch && *arch != "clip") || (!arch && f.find_tensor("token_embd.weight"))) {
    throw Error(f.path() + ": this looks like a language model (general.architecture '" + arch.value_or("?") +
                "'), not a vision projector (mmproj) file");
  }
}

void require_vision_encoder(const GgufFile& f) {
  if (f.get_bool_opt("clip.has_vision_encoder").value_or(false)) return;
  if (f.get_bool_opt("clip.has_audio_encoder").value_or(false))
    throw Error(f.path() + ": this projector holds an audio encoder only; pagoda reads vision encoders");
  throw Error(f.path() + ": no vision encoder (clip.has_vision_encoder is absent or false)");
}

// clip.vision.projector_type (files with several encoders) over clip.projector_type; files with
// neither are examples/llava's, LLaVA's MLP unless clip.has_qwen2vl_merger says Qwen2-VL.
ProjectorType read_projector_type(const GgufFile& f) {
  std::optional<std::string> name = f.get_string_opt("clip.vision.projector_type");
  if (!name) name = f.get_string_opt("clip.projector_type");
  if (!name) name = f.get_bool_opt("clip.has_qwen2vl_merger").value_or(false) ? "qwen2vl_merger" : "mlp";
  if (*name == "mlp") {
    // llama.cpp reads "mlp" with a fourth projector layer as Yi-VL's MLP_NORM.
    if (f.find_tensor("mm.3.weight")) {
      throw Error(f.path() + ": projector type mlp_norm (\"mlp\" with mm.3.weight, Yi-VL's) is not supported; " +
                  kSupported);
    }
    return ProjectorType::LlavaMlp;
  }
  for (ProjectorType t : {ProjectorType::Gemma3, ProjectorType::Qwen2VL, ProjectorType::Qwen25VL})
    if (*name == projector_type_name(t)) return t;
  throw Error(f.path() + ": projector type " + *name + " is not supported; " + kSupported);
}

int32_t in_range(uint64_t v, const GgufFile& f, const std::string& key, int64_t lo, int64_t hi) {
  if (v < uint64_t(lo) || v > uint64_t(hi)) {
    throw Error(f.path() + ": " + key + " = " + std::to_string(v) + " is out of range [" + std::to_string(lo) + ", " +
                std::to_string(hi) + "]");
  }
  return int32_t(v);
}

int32_t required(const GgufFile& f, const std::string& key, int64_t lo, int64_t hi) {
  if (!f.find(key)) throw Error(f.path() + ": key " + key + " is missing");
  return in_range(f.get_uint(key), f, key, lo, hi);
}

int32_t optional(const GgufFile& f, const std::string& key, int32_t fallback, int64_t lo, int64_t hi) {
  const std::optional<uint64_t> v = f.get_uint_opt(key);
  return v ? in_range(*v, f, key, lo, hi) : fallback;
}

std::array<float, 3> rgb(const GgufFile& f, const std::string& key, bool nonzero) {
  if (!f.find(key)) throw Error(f.path() + ": key " + key + " is missing");
  const std::vector<float> v = f.get_float_array(key);
  if (v.size() != 3) throw Error(f.path() + ": " + key + " has " + std::to_string(v.size()) + " values, expected 3");
  for (float x : v) {
    if (!std::isfinite(x) || (nonzero && x == 0.0f))
      throw Error(f.path() + ": " + key + " holds " + std::to_string(x) + (nonzero ? "; expected nonzero" : ""));
  }
  return {v[0], v[1], v[2]};
}

VisionActivation read_activation(const GgufFile& f) {
  const bool gelu = f.get_bool_opt("clip.use_gelu").value_or(false);
  const bool silu = f.get_bool_opt("clip.use_silu").value_or(false);
  if (gelu && silu) throw Error(f.path() + ": clip.use_gelu and clip.use_silu are both true");
  return gelu ? VisionActivation::Gelu : silu ? VisionActivation::Silu : VisionActivation::QuickGelu;
}

// LLaVA's features are the output of the block before the last (llama.cpp's max_feature_layer),
// or of block clip.vision.feature_layer (0: the encoder's input). Several feature layers, whose
// outputs granite-vision concatenates, are refused.
int32_t llava_layers_run(const GgufFile& f, int32_t n_layers) {
  const std::string key = "clip.vision.feature_layer";
  if (!f.find(key)) return n_layers - 1;
  const std::vector<int32_t> layers = f.get_int32_array(key);
  if (layers.empty()) return n_layers - 1;
  if (layers.size() > 1)
    throw Error(f.path() + ": " + key + " names " + std::to_string(layers.size()) + " layers; one is supported");
  if (layers[0] < 0) throw Error(f.path() + ": " + key + " = " + std::to_string(layers[0]) + " is negative");
  return in_range(uint64_t(layers[0]), f, key, 0, n_layers);
}

// Gemma 3 pools the patch grid by clip.vision.projector.scale_factor (4) along each side.
void read_gemma3(const GgufFile& f, VisionConfig& c) {
  const std::string key = "clip.vision.projector.scale_factor";
  const int32_t side = c.patches_per_side();
  const int32_t scale = optional(f, key, 4, 1, kMaxVisionSide);
  if (side % scale != 0) {
    throw Error(f.path() + ": the " + std::to_string(side) + "x" + std::to_string(side) +
                " patch grid does not pool evenly by " + key + " = " + std::to_string(scale));
  }
  c.tokens_per_image = (side / scale) * (side / scale);
}

// Qwen: 2x2 merging unless clip.vision.spatial_merge_size says otherwise; Qwen2.5-VL's window
// attention: every clip.vision.n_wa_pattern-th block attends over the whole image (llama.cpp
// requires the key; 0: every block does), the others within windows of window_size pixels.
void read_qwen(const GgufFile& f, VisionConfig& c) {
  c.spatial_merge = optional(f, "clip.vision.spatial_merge_size", 2, 1, kMaxSpatialMerge);
  const int64_t max_pixels = int64_t(kMaxVisionSide) * kMaxVisionSide;
  c.min_pixels = optional(f, "clip.vision.image_min_pixels", 0, 0, max_pixels);
  c.max_pixels = optional(f, "clip.vision.image_max_pixels", 0, 0, max_pixels);
  if (c.max_pixels > 0 && c.min_pixels > c.max_pixels) {
    throw Error(f.path() + ": clip.vision.image_min_pixels = " + std::to_string(c.min_pixels) +
                " exceeds clip.vision.image_max_pixels = " + std::to_string(c.max_pixels));
  }
  if (c.head_dim() % 4 != 0) {
    throw Error(f.path() + ": head dimension " + std::to_string(c.head_dim()) +
                " is not a multiple of 4, which Qwen's 2-D rotary positions need");
  }
  if (c.projector != ProjectorType::Qwen25VL) return;
  const int32_t pattern = required(f, "clip.vision.n_wa_pattern", 0, c.n_layers);
  for (int32_t l = 0; l < c.n_layers; ++l)
    if (pattern == 0 || (l + 1) % pattern == 0) c.full_attention_layers.push_back(l);
  c.window_size = optional(f, "clip.vision.window_size", 112, 1, kMaxVisionSide);
  const int32_t unit = c.patch_size * c.spatial_merge;
  if (c.window_size % unit != 0) {
    throw Error(f.path() + ": clip.vision.window_size = " + std::to_string(c.window_size) +
                " is not a whole number of merged patches (" + std::to_string(unit) + " pixels)");
  }
}

}  // namespace

ProjectorMetadata read_projector_metadata(const GgufFile& f) {
  refuse_language_model(f);
  require_vision_encoder(f);
  ProjectorMetadata m;
  VisionConfig& c = m.config;
  c.projector = read_projector_type(f);
  m.legacy = f.find("clip.has_llava_projector") || f.find("clip.has_qwen2vl_merger");
  c.image_size = required(f, "clip.vision.image_size", 1, kMaxVisionSide);
  c.patch_size = required(f, "clip.vision.patch_size", 1, kMaxPatchSize);
  c.dim = required(f, "clip.vision.embedding_length", 1, kMaxVisionDim);
  c.n_heads = required(f, "clip.vision.attention.head_count", 1, kMaxVisionDim);
  c.n_layers = required(f, "clip.vision.block_count", 1, kMaxVisionLayers);
  if (c.dim % c.n_heads != 0) {
    throw Error(f.path() + ": clip.vision.embedding_length = " + std::to_string(c.dim) +
                " is not a multiple of the head count " + std::to_string(c.n_heads));
  }
  if (c.image_size % c.patch_size != 0) {
    throw Error(f.path() + ": clip.vision.image_size = " + std::to_string(c.image_size) +
                " is not a multiple of the patch size " + std::to_string(c.patch_size));
  }
  const std::string eps_key = "clip.vision.attention.layer_norm_epsilon";
  if (!f.find(eps_key)) throw Error(f.path() + ": key " + eps_key + " is missing");
  c.eps = f.get_float(eps_key);
  if (!(c.eps > 0.0f && c.eps < 1.0f))
    throw Error(f.path() + ": " + eps_key + " = " + std::to_string(c.eps) + " is not in (0, 1)");
  c.image_mean = rgb(f, "clip.vision.image_mean", false);
  c.image_std = rgb(f, "clip.vision.image_std", true);
  c.activation = read_activation(f);

  if (c.projector != ProjectorType::Qwen2VL)
    m.ffn_dim_key = optional(f, "clip.vision.feed_forward_length", 0, 0, kMaxVisionDim);
  if (!(c.projector == ProjectorType::LlavaMlp && f.find("clip.has_llava_projector")))
    m.projection_dim_key = optional(f, "clip.vision.projection_dim", 0, 0, kMaxVisionDim);

  c.layers_run = c.projector == ProjectorType::LlavaMlp ? llava_layers_run(f, c.n_layers) : c.n_layers;
  if (c.projector == ProjectorType::Gemma3) read_gemma3(f, c);
  if (is_qwen(c.projector)) read_qwen(f, c);
  return m;
}

void check_projector_widths(const VisionConfig& c, const std::string& path) {
  auto check = [&](int32_t v, const char* what) {
    if (v < 1 || v > kMaxVisionDim)
      throw Error(path + ": " + what + " " + std::to_string(v) + " is out of range [1, " +
                  std::to_string(kMaxVisionDim) + "]");
  };
  check(c.ffn_dim, "the FFN width");
  check(c.projection_dim, "the projector's output width");
}

}  // namespace pagoda
