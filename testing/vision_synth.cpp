// Random-weight projector files: the keys and tensors each family's converter writes (see
// vision_synth.h), in the file's order, values drawn per tensor.

#include "testing/vision_synth.h"

#include <cmath>
#include <random>
#include <span>

#include "engine/gguf/gguf_writer.h"
#include "pagoda/error.h"
#include "testing/synth_random.h"

namespace pagoda {

namespace {

bool is_qwen(ProjectorType t) { return t == ProjectorType::Qwen2VL || t == ProjectorType::Qwen25VL; }

// One tensor: its name in the file, the name its values are drawn under (the Current layout's,
// so both layouts hold the same weights), its shape in GGUF order, and how it is drawn.
struct SynthTensor {
  enum class Kind { Matrix, Norm, Bias, Zeros };
  std::string name, canonical;
  std::vector<uint64_t> shape;
  Kind kind;
  uint64_t fan_in = 1;  // Matrix: the inputs each output sums over
};

// Each tensor has its own generator, seeded from (seed, canonical name): seed_seq's mixing and
// mt19937_64 are fixed by the standard, so every platform draws the same values.
std::mt19937_64 tensor_rng(uint64_t seed, const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (unsigned char ch : name) h = (h ^ ch) * 0x100000001b3ull;
  std::seed_seq seq{uint32_t(seed), uint32_t(seed >> 32), uint32_t(h), uint32_t(h >> 32)};
  return std::mt19937_64(seq);
}

// Uniform with variance 1/fan_in for matrices keeps activations O(1) through many blocks; norms
// near 1, small biases.
std::vector<float> tensor_values(const SynthTensor& t, uint64_t seed) {
  uint64_t n = 1;
  for (uint64_t d : t.shape) n *= d;
  std::vector<float> v(n, 0.0f);
  if (t.kind == SynthTensor::Kind::Zeros) return v;
  std::mt19937_64 rng = tensor_rng(seed, t.canonical);
  const float scale = t.kind == SynthTensor::Kind::Matrix ? std::sqrt(3.0f / float(t.fan_in)) : 0.1f;
  const float offset = t.kind == SynthTensor::Kind::Norm ? 1.0f : 0.0f;
  for (float& x : v) x = offset + scale * uniform_symmetric(rng);
  return v;
}

class TensorList {
 public:
  explicit TensorList(bool legacy) : legacy_(legacy) {}
  void matrix(const std::string& name, std::vector<uint64_t> shape, uint64_t fan_in) {
    list.push_back({name, name, std::move(shape), SynthTensor::Kind::Matrix, fan_in});
  }
  void vector(const std::string& name, uint64_t n, SynthTensor::Kind kind) { list.push_back({name, name, {n}, kind}); }
  void norm(const std::string& prefix, uint64_t n, bool bias) {
    vector(prefix + ".weight", n, SynthTensor::Kind::Norm);
    if (bias) vector(prefix + ".bias", n, SynthTensor::Kind::Bias);
  }
  void linear(const std::string& prefix, uint64_t rows, uint64_t cols) {
    matrix(prefix + ".weight", {cols, rows}, cols);
    vector(prefix + ".bias", rows, SynthTensor::Kind::Bias);
  }
  // The FFN's up and down: examples/llava's converters named fc1 (up) "ffn_down" and fc2 "ffn_up".
  void ffn(const std::string& p, uint64_t dim, uint64_t width) {
    for (const char* part : {"ffn_up", "ffn_down"}) {
      const bool up = part == std::string("ffn_up");
      const std::string canonical = p + part;
      const std::string name = legacy_ ? p + (up ? "ffn_down" : "ffn_up") : canonical;
      linear(canonical, up ? width : dim, up ? dim : width);
      for (size_t i = list.size() - 2; i < list.size(); ++i)
        list[i].name = name + list[i].canonical.substr(canonical.size());
    }
  }
  std::vector<SynthTensor> list;

 private:
  bool legacy_;
};

void block_tensors(TensorList& t, const VisionConfig& c, int32_t layer) {
  const std::string p = "v.blk." + std::to_string(layer) + ".";
  const uint64_t dim = c.dim;
  const bool layer_norm = c.projector != ProjectorType::Qwen25VL;  // Qwen2.5-VL's are RMSNorms
  t.norm(p + "ln1", dim, layer_norm);
  for (const char* m : {"attn_q", "attn_k", "attn_v", "attn_out"}) t.linear(p + m, dim, dim);
  t.norm(p + "ln2", dim, layer_norm);
  if (c.projector == ProjectorType::Qwen25VL) t.linear(p + "ffn_gate", c.ffn_dim, dim);
  t.ffn(p, dim, c.ffn_dim);
}

std::vector<SynthTensor> synth_tensors(const VisionConfig& c, bool legacy) {
  using Kind = SynthTensor::Kind;
  TensorList t(legacy);
  const uint64_t dim = c.dim, p = c.patch_size, side = c.patches_per_side(), out = c.projection_dim;
  // examples/llava's LLaVA converter writes the projector first.
  const bool projector_first = legacy && c.projector == ProjectorType::LlavaMlp;
  auto llava_projector = [&] {
    t.linear("mm.0", out, dim);
    t.linear("mm.2", out, out);
  };
  if (projector_first) llava_projector();
  if (c.projector == ProjectorType::LlavaMlp) t.matrix("v.class_embd", {dim}, dim);
  t.matrix("v.patch_embd.weight", {p, p, 3, dim}, 3 * p * p);
  if (is_qwen(c.projector)) t.matrix("v.patch_embd.weight.1", {p, p, 3, dim}, 3 * p * p);
  if (c.projector == ProjectorType::Gemma3) t.vector("v.patch_embd.bias", dim, Kind::Bias);
  if (!is_qwen(c.projector)) {
    const uint64_t positions = side * side + (c.projector == ProjectorType::LlavaMlp ? 1 : 0);
    t.matrix("v.position_embd.weight", {dim, positions}, dim);
  }
  if (c.projector == ProjectorType::LlavaMlp) t.norm("v.pre_ln", dim, true);
  for (int32_t l = 0; l < c.n_layers; ++l) block_tensors(t, c, l);
  switch (c.projector) {
    case ProjectorType::LlavaMlp:
      if (!projector_first) llava_projector();
      break;
    case ProjectorType::Gemma3:
      t.norm("v.post_ln", dim, true);
      t.matrix("mm.input_projection.weight", {out, dim}, dim);  // x·W: stored [dim][out]
      t.vector("mm.soft_emb_norm.weight", dim, Kind::Norm);
      break;
    case ProjectorType::Qwen2VL:
    case ProjectorType::Qwen25VL: {
      const uint64_t merged = dim * uint64_t(c.spatial_merge * c.spatial_merge);
      t.norm("v.post_ln", dim, c.projector == ProjectorType::Qwen2VL);
      t.linear("mm.0", merged, merged);
      t.linear("mm.2", out, merged);
      // qwen2_vl_surgery.py's placeholder, which examples/llava's loader looks up.
      if (legacy) t.list.push_back({"v.position_embd.weight", "v.position_embd.weight", {10, 10}, Kind::Zeros});
      break;
    }
  }
  return t.list;
}

// Qwen2.5-VL's files state the full-attention blocks as a period: blocks k-1, 2k-1, ... (0: all).
int32_t wa_pattern(const VisionConfig& c) {
  const std::vector<int32_t>& full = c.full_attention_layers;
  if (full.empty()) throw Error("synthetic projector: Qwen2.5-VL needs full_attention_layers");
  const int32_t k = full[0] + 1;
  std::vector<int32_t> expected;
  for (int32_t l = 0; l < c.n_layers; ++l)
    if ((l + 1) % k == 0) expected.push_back(l);
  if (full != expected)
    throw Error("synthetic projector: full_attention_layers must be every " + std::to_string(k) + "th block");
  return k;
}

// The config as the file states it, which load_projector reads back; throws for what it cannot state.
VisionConfig settle(const VisionSynthSpec& spec) {
  VisionConfig c = spec.config;
  const std::string at = "synthetic projector: ";
  if (c.image_size < 1 || c.patch_size < 1 || c.dim < 1 || c.ffn_dim < 1 || c.n_heads < 1 || c.n_layers < 1 ||
      c.projection_dim < 1)
    throw Error(at + "every size must be positive");
  if (c.dim % c.n_heads != 0 || c.image_size % c.patch_size != 0)
    throw Error(at + "dim must be a multiple of n_heads and image_size of patch_size");
  if (spec.type != GgmlType::F32 && spec.type != GgmlType::F16) throw Error(at + "the type must be F32 or F16");
  const bool legacy = spec.layout == ProjectorLayout::Legacy;
  if (legacy && (c.projector == ProjectorType::Gemma3 || c.projector == ProjectorType::Qwen25VL)) {
    throw Error(at + "examples/llava's layout has no " + projector_type_name(c.projector) +
                " projector; write the current layout");
  }
  c.activation = c.projector == ProjectorType::Gemma3     ? VisionActivation::Gelu
                 : c.projector == ProjectorType::Qwen25VL ? VisionActivation::Silu
                                                          : VisionActivation::QuickGelu;
  const int32_t side = c.patches_per_side();
  c.layers_run = c.projector != ProjectorType::LlavaMlp ? c.n_layers : c.layers_run > 0 ? c.layers_run : c.n_layers - 1;
  if (c.layers_run > c.n_layers) throw Error(at + "layers_run exceeds n_layers");
  if (legacy && c.projector == ProjectorType::LlavaMlp && c.layers_run != c.n_layers - 1)
    throw Error(at + "examples/llava's layout runs n_layers - 1 of LLaVA's blocks");
  if (c.projector == ProjectorType::Gemma3) {
    if (c.tokens_per_image == 0) c.tokens_per_image = (side / 4) * (side / 4);
    const auto pooled = int32_t(std::lround(std::sqrt(double(c.tokens_per_image))));
    if (pooled < 1 || pooled * pooled != c.tokens_per_image || side % pooled != 0)
      throw Error(at + "tokens_per_image must be a square whose side divides the patch grid's");
  } else {
    c.tokens_per_image = 0;
  }
  if (!is_qwen(c.projector)) c.spatial_merge = 1, c.min_pixels = 0, c.max_pixels = 0;
  if (is_qwen(c.projector) && (c.spatial_merge < 1 || c.head_dim() % 4 != 0))
    throw Error(at + "Qwen needs spatial_merge >= 1 and a head dimension that is a multiple of 4");
  if (c.projector == ProjectorType::Qwen25VL) {
    if (c.window_size == 0) c.window_size = 112;
    wa_pattern(c);
  } else {
    c.window_size = 0;
    c.full_attention_layers.clear();
  }
  return c;
}

void write_keys(GgufWriter& w, const VisionConfig& c, const VisionSynthSpec& spec) {
  const bool legacy = spec.layout == ProjectorLayout::Legacy;
  w.set_string("general.architecture", "clip");
  if (!legacy) w.set_string("general.type", "mmproj");
  w.set_string("general.name", "pagoda-synth projector (random weights, seed " + std::to_string(spec.seed) + ")");
  w.set_u32("general.file_type", spec.type == GgmlType::F16 ? 1 : 0);
  if (legacy) {
    const bool llava = c.projector == ProjectorType::LlavaMlp;
    w.set_string("general.description", llava ? "image encoder for LLaVA" : "image encoder for Qwen2VL");
    w.set_bool("clip.has_text_encoder", false);
    w.set_bool(llava ? "clip.has_llava_projector" : "clip.has_qwen2vl_merger", true);
  }
  w.set_bool("clip.has_vision_encoder", true);
  w.set_string("clip.projector_type", projector_type_name(c.projector));
  w.set_u32("clip.vision.image_size", uint32_t(c.image_size));
  w.set_u32("clip.vision.patch_size", uint32_t(c.patch_size));
  w.set_u32("clip.vision.embedding_length", uint32_t(c.dim));
  // Qwen2-VL's converters write 0 (examples/llava) or the language model's width here.
  const int32_t ffn_key = c.projector != ProjectorType::Qwen2VL ? c.ffn_dim : legacy ? 0 : c.projection_dim;
  w.set_u32("clip.vision.feed_forward_length", uint32_t(ffn_key));
  w.set_u32("clip.vision.block_count", uint32_t(c.n_layers));
  w.set_u32("clip.vision.attention.head_count", uint32_t(c.n_heads));
  w.set_f32("clip.vision.attention.layer_norm_epsilon", c.eps);
  // examples/llava's LLaVA converter writes CLIP's own projection width (ViT-L's 768), unused.
  const bool clip_width = legacy && c.projector == ProjectorType::LlavaMlp;
  w.set_u32("clip.vision.projection_dim", uint32_t(clip_width ? 768 : c.projection_dim));
  w.set_f32_array("clip.vision.image_mean", {c.image_mean.begin(), c.image_mean.end()});
  w.set_f32_array("clip.vision.image_std", {c.image_std.begin(), c.image_std.end()});
  // examples/llava's loader requires use_gelu; the current converters write what is true.
  if (legacy || c.activation == VisionActivation::Gelu)
    w.set_bool("clip.use_gelu", c.activation == VisionActivation::Gelu);
  if ((legacy && is_qwen(c.projector)) || c.activation == VisionActivation::Silu)
    w.set_bool("clip.use_silu", c.activation == VisionActivation::Silu);
  if (c.projector == ProjectorType::LlavaMlp && c.layers_run != c.n_layers - 1)
    w.set_i32_array("clip.vision.feature_layer", {c.layers_run});
  // The converters write what differs from llama.cpp's defaults only.
  if (c.projector == ProjectorType::Gemma3) {
    const auto scale = uint32_t(c.patches_per_side() / std::lround(std::sqrt(double(c.tokens_per_image))));
    if (scale != 4) w.set_u32("clip.vision.projector.scale_factor", scale);
  }
  if (is_qwen(c.projector)) {
    if (c.spatial_merge != 2) w.set_u32("clip.vision.spatial_merge_size", uint32_t(c.spatial_merge));
    if (c.min_pixels > 0) w.set_u32("clip.vision.image_min_pixels", uint32_t(c.min_pixels));
    if (c.max_pixels > 0) w.set_u32("clip.vision.image_max_pixels", uint32_t(c.max_pixels));
  }
  if (c.projector == ProjectorType::Qwen25VL) {
    w.set_u32("clip.vision.n_wa_pattern", uint32_t(wa_pattern(c)));
    if (c.window_size != 112) w.set_u32("clip.vision.window_size", uint32_t(c.window_size));
  }
}

VisionConfig base(ProjectorType family, int32_t image, int32_t dim, int32_t ffn, int32_t heads, int32_t layers,
                  int32_t out, float eps) {
  VisionConfig c;
  c.projector = family, c.image_size = image, c.patch_size = 14, c.dim = dim, c.ffn_dim = ffn, c.n_heads = heads;
  c.n_layers = layers, c.projection_dim = out, c.eps = eps;
  if (family == ProjectorType::Gemma3) {
    c.image_mean = {0.5f, 0.5f, 0.5f}, c.image_std = {0.5f, 0.5f, 0.5f};  // SigLIP's
  } else {
    c.image_mean = {0.48145466f, 0.4578275f, 0.40821073f};  // CLIP's, which Qwen2-VL keeps
    c.image_std = {0.26862954f, 0.26130258f, 0.27577711f};
  }
  if (is_qwen(family)) c.spatial_merge = 2;
  return c;
}

}  // namespace

const std::vector<VisionSynthPreset>& vision_synth_presets() {
  static const std::vector<VisionSynthPreset> presets = [] {
    using P = ProjectorType;
    std::vector<VisionSynthPreset> p;
    p.push_back({"tiny", "image 56, dim 64, 3 blocks", base(P::LlavaMlp, 56, 64, 128, 4, 3, 96, 1e-5f)});
    p.push_back({"full", "LLaVA-1.5's CLIP ViT-L/336: dim 1024, 24 blocks, MLP 1024->4096->4096",
                 base(P::LlavaMlp, 336, 1024, 4096, 16, 24, 4096, 1e-5f)});
    VisionConfig gemma_tiny = base(P::Gemma3, 112, 64, 128, 4, 2, 96, 1e-6f);
    gemma_tiny.tokens_per_image = 4;
    p.push_back({"tiny", "image 112, dim 64, 2 blocks, 4 tokens", gemma_tiny});
    VisionConfig gemma = base(P::Gemma3, 896, 1152, 4304, 16, 27, 2560, 1e-6f);
    gemma.tokens_per_image = 256;
    p.push_back({"full", "Gemma 3 4B's SigLIP: image 896, dim 1152, 27 blocks, 256 tokens of 2560", gemma});
    p.push_back({"tiny", "image 56, dim 64, 3 blocks", base(P::Qwen2VL, 56, 64, 128, 4, 3, 96, 1e-6f)});
    p.push_back({"full", "Qwen2-VL-2B's: dim 1280, 32 blocks, merger to 1536",
                 base(P::Qwen2VL, 560, 1280, 5120, 16, 32, 1536, 1e-6f)});
    VisionConfig qwen25_tiny = base(P::Qwen25VL, 56, 64, 128, 4, 4, 96, 1e-6f);
    qwen25_tiny.window_size = 112, qwen25_tiny.full_attention_layers = {1, 3};
    p.push_back({"tiny", "image 56, dim 64, 4 blocks (1 and 3 full attention)", qwen25_tiny});
    VisionConfig qwen25 = base(P::Qwen25VL, 560, 1280, 3420, 16, 32, 2048, 1e-6f);
    qwen25.window_size = 112, qwen25.full_attention_layers = {7, 15, 23, 31};
    p.push_back({"full", "Qwen2.5-VL-3B's: dim 1280, 32 blocks, window 112, merger to 2048", qwen25});
    return p;
  }();
  return presets;
}

const VisionSynthPreset& find_vision_synth_preset(ProjectorType family, const std::string& name) {
  std::string known;
  for (const VisionSynthPreset& p : vision_synth_presets()) {
    if (p.config.projector != family) continue;
    if (p.name == name) return p;
    known += (known.empty() ? "" : ", ") + p.name;
  }
  throw Error("unknown " + std::string(projector_type_name(family)) + " projector preset '" + name +
              "' (known: " + known + ")");
}

VisionConfig write_synth_projector(const std::string& path, const VisionSynthSpec& spec) {
  const VisionConfig c = settle(spec);
  GgufWriter w;
  write_keys(w, c, spec);
  const std::vector<SynthTensor> tensors = synth_tensors(c, spec.layout == ProjectorLayout::Legacy);
  auto type_of = [&](const SynthTensor& t) {
    return t.kind == SynthTensor::Kind::Matrix && t.shape.size() >= 2 ? spec.type : GgmlType::F32;
  };
  for (const SynthTensor& t : tensors) w.declare_tensor(t.name, t.shape, type_of(t));
  GgufTensorStream stream = w.open_stream(path);
  for (const SynthTensor& t : tensors) {
    const std::vector<float> values = tensor_values(t, spec.seed);
    if (type_of(t) == GgmlType::F32) {
      stream.write(t.name, std::as_bytes(std::span(values)));
    } else {
      stream.write(t.name, encode_tensor(type_of(t), values));
    }
  }
  stream.finish();
  return c;
}

}  // namespace pagoda
