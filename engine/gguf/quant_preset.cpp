#include "engine/gguf/quant_preset.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <numeric>

#include "pagoda/error.h"

namespace pagoda {

namespace {

struct PresetInfo {
  QuantPreset preset;
  const char* name;
  uint32_t file_type;  // llama_ftype
  GgmlType type;
};

constexpr PresetInfo kPresets[] = {
    {QuantPreset::F16, "F16", 1, GgmlType::F16},           {QuantPreset::BF16, "BF16", 32, GgmlType::BF16},
    {QuantPreset::Q8_0, "Q8_0", 7, GgmlType::Q8_0},        {QuantPreset::Q4_0, "Q4_0", 2, GgmlType::Q4_0},
    {QuantPreset::Q4_1, "Q4_1", 3, GgmlType::Q4_1},        {QuantPreset::Q5_0, "Q5_0", 8, GgmlType::Q5_0},
    {QuantPreset::Q5_1, "Q5_1", 9, GgmlType::Q5_1},        {QuantPreset::Q4_K_M, "Q4_K_M", 15, GgmlType::Q4_K},
    {QuantPreset::Q5_K_M, "Q5_K_M", 17, GgmlType::Q5_K},   {QuantPreset::Q6_K, "Q6_K", 18, GgmlType::Q6_K},
    {QuantPreset::Q2_K, "Q2_K", 10, GgmlType::Q2_K},       {QuantPreset::Q3_K_S, "Q3_K_S", 11, GgmlType::Q3_K},
    {QuantPreset::Q3_K_M, "Q3_K_M", 12, GgmlType::Q3_K},   {QuantPreset::Q3_K_L, "Q3_K_L", 13, GgmlType::Q3_K},
    {QuantPreset::IQ4_NL, "IQ4_NL", 25, GgmlType::IQ4_NL}, {QuantPreset::IQ4_XS, "IQ4_XS", 30, GgmlType::IQ4_XS},
};

const PresetInfo& info(QuantPreset preset) {
  for (const PresetInfo& p : kPresets) {
    if (p.preset == preset) return p;
  }
  throw Error("unknown quantization preset");
}

// The tensor kinds llama-quantize tells apart, matched by name as it does.
enum class Category { TokenEmbd, Output, AttnV, AttnK, AttnQ, AttnOutput, FfnUp, FfnGate, FfnDown, Other };

Category category_of(const std::string& name) {
  auto has = [&](const char* part) { return name.find(part) != std::string::npos; };
  if (name == "output.weight") return Category::Output;
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") return Category::TokenEmbd;
  // Fused QKV and MLA's kv_b carry the values, so they share attn_v's rules.
  if (has("attn_qkv.weight") || has("attn_kv_b.weight") || has("attn_v.weight")) return Category::AttnV;
  if (has("attn_k.weight")) return Category::AttnK;
  if (has("attn_q.weight")) return Category::AttnQ;
  if (has("attn_output.weight")) return Category::AttnOutput;
  if (has("ffn_up")) return Category::FfnUp;
  if (has("ffn_gate")) return Category::FfnGate;
  if (has("ffn_down")) return Category::FfnDown;
  return Category::Other;
}

// Matrices whose name ends in "weight", except norms, MoE routers and the small or
// position-like tensors llama-quantize leaves alone.
bool quantizable(const QuantTensor& t) {
  const std::string& n = t.name;
  // A [dim, 1] matrix (bert's cls.output.weight) is a vector to llama-quantize.
  if (ggml_shape(t.shape).size() < 2) return false;
  if (n.size() < 6 || n.compare(n.size() - 6, 6, "weight") != 0) return false;
  for (const char* keep :
       {"_norm.weight", "ffn_gate_inp.weight", "altup", "laurel", "per_layer_model_proj", "ssm_conv1d",
        "shortconv.conv.weight", "attn_rel_b.weight", ".position_embd", ".patch_embd", "time_mix_"}) {
    if (n.find(keep) != std::string::npos) return false;
  }
  return n != "position_embd.weight" && n != "token_types.weight";
}

// llama.cpp's choice of the layers that get more bits: the first and last eighth, and every
// third layer in between.
bool use_more_bits(int i_layer, int n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

int block_elements(GgmlType t) { return kernels::block_shape(t).elements; }

// A type whose blocks fit rows of `row` elements: the 256-element types fall back to a
// 32-element type as llama.cpp's tensor_type_fallback does, and anything that still does not
// fit to F16.
GgmlType fit_rows(GgmlType wanted, uint64_t row) {
  if (row % uint64_t(block_elements(wanted)) == 0) return wanted;
  GgmlType type = wanted;
  switch (wanted) {
    case GgmlType::Q4_K: type = GgmlType::Q5_0; break;
    case GgmlType::Q5_K: type = GgmlType::Q5_1; break;
    case GgmlType::Q6_K: type = GgmlType::Q8_0; break;
    case GgmlType::Q2_K:
    case GgmlType::Q3_K: type = GgmlType::Q4_0; break;
    case GgmlType::IQ4_XS: type = GgmlType::IQ4_NL; break;
    default: break;
  }
  return row % uint64_t(block_elements(type)) == 0 ? type : GgmlType::F16;
}

int layer_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  int layer = -1;
  const char* begin = name.data() + 4;
  const auto [end, ec] = std::from_chars(begin, name.data() + name.size(), layer);
  return ec == std::errc() && end < name.data() + name.size() && *end == '.' ? layer : -1;
}

}  // namespace

QuantPreset parse_quant_preset(std::string_view name) {
  std::string upper(name);
  for (char& c : upper) c = char(std::toupper(static_cast<unsigned char>(c)));
  std::string known;
  for (const PresetInfo& p : kPresets) {
    if (upper == p.name) return p.preset;
    std::string lower = p.name;
    for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
    known += (known.empty() ? "" : ", ") + lower;
  }
  throw Error("unknown quantization type '" + std::string(name) + "' (known: " + known + ")");
}

const char* quant_preset_name(QuantPreset preset) { return info(preset).name; }
uint32_t quant_preset_file_type(QuantPreset preset) { return info(preset).file_type; }
GgmlType quant_preset_default_type(QuantPreset preset) { return info(preset).type; }

std::vector<uint64_t> ggml_shape(std::span<const uint64_t> shape) {
  size_t dims = shape.size();
  while (dims > 1 && shape[dims - 1] == 1) --dims;
  return {shape.begin(), shape.begin() + std::ptrdiff_t(dims)};
}

std::vector<size_t> llama_tensor_order(std::span<const QuantTensor> tensors) {
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const int la = layer_of(tensors[a].name), lb = layer_of(tensors[b].name);
    return la != lb ? la < lb : tensors[a].name < tensors[b].name;
  });
  return order;
}

namespace {

// llama_tensor_get_type's choice for attn_v (and the fused QKV and kv_b that carry values), the
// i_attn_v-th of n_attn_v; `type` when the preset makes no exception.
GgmlType attn_v_type(QuantPreset preset, GgmlType type, int i_attn_v, int n_attn_v, int n_gqa) {
  switch (preset) {
    case QuantPreset::Q2_K: return n_gqa >= 4 ? GgmlType::Q4_K : GgmlType::Q3_K;
    case QuantPreset::Q3_K_M: return i_attn_v < 2 ? GgmlType::Q5_K : GgmlType::Q4_K;
    case QuantPreset::Q3_K_L: return GgmlType::Q5_K;
    case QuantPreset::IQ4_NL:
    case QuantPreset::IQ4_XS: return n_gqa >= 4 ? GgmlType::Q5_K : type;
    case QuantPreset::Q4_K_M:
    case QuantPreset::Q5_K_M: return use_more_bits(i_attn_v, n_attn_v) ? GgmlType::Q6_K : type;
    default: return type;
  }
}

// The same for ffn_down of layer i_layer (counted along the tensor order) of n_layers.
GgmlType ffn_down_type(QuantPreset preset, GgmlType type, int i_layer, int n_layers) {
  switch (preset) {
    case QuantPreset::Q2_K: return GgmlType::Q3_K;
    case QuantPreset::Q3_K_M: return i_layer < n_layers / 16 ? GgmlType::Q5_K : GgmlType::Q4_K;
    case QuantPreset::Q3_K_L: return GgmlType::Q5_K;
    case QuantPreset::IQ4_NL:
    case QuantPreset::IQ4_XS: return i_layer < n_layers / 8 ? GgmlType::Q5_K : type;
    case QuantPreset::Q4_K_M:
    case QuantPreset::Q5_K_M: return use_more_bits(i_layer, n_layers) ? GgmlType::Q6_K : type;
    default: return type;
  }
}

// The same for attn_output (dense models).
GgmlType attn_output_type(QuantPreset preset, GgmlType type) {
  switch (preset) {
    case QuantPreset::Q2_K: return GgmlType::Q3_K;
    case QuantPreset::Q3_K_M: return GgmlType::Q4_K;
    case QuantPreset::Q3_K_L: return GgmlType::Q5_K;
    default: return type;
  }
}

}  // namespace

std::vector<QuantChoice> choose_quant_types(QuantPreset preset, std::span<const QuantTensor> tensors, int n_layers,
                                            int n_gqa) {
  const GgmlType base = quant_preset_default_type(preset);
  const bool mixture = base != GgmlType::F16 && base != GgmlType::BF16;
  int n_attn_v = 0;
  bool tied_embeddings = true;
  for (const QuantTensor& t : tensors) {
    if (category_of(t.name) == Category::AttnV) ++n_attn_v;
    if (category_of(t.name) == Category::Output) tied_embeddings = false;
  }

  std::vector<QuantChoice> choices(tensors.size());
  int i_attn_v = 0, i_ffn_down = 0;
  for (size_t index : llama_tensor_order(tensors)) {
    const QuantTensor& t = tensors[index];
    if (!quantizable(t)) {
      choices[index] = {t.type, t.type};
      continue;
    }
    if (!mixture) {  // F16 and BF16 convert every matrix, with no exceptions
      choices[index] = {base, base};
      continue;
    }
    GgmlType type = base;
    const uint64_t row = t.shape[0];
    switch (category_of(t.name)) {
      case Category::TokenEmbd:
        if (!tied_embeddings) break;
        [[fallthrough]];  // the tied embedding is the output matrix too
      case Category::Output:
        if (row % uint64_t(block_elements(base)) != 0) {
          type = GgmlType::Q8_0;
        } else if (base != GgmlType::Q8_0) {
          type = GgmlType::Q6_K;
        }
        break;
      case Category::AttnV: type = attn_v_type(preset, type, i_attn_v++, n_attn_v, n_gqa); break;
      case Category::FfnDown: type = ffn_down_type(preset, type, i_ffn_down++, n_layers); break;
      case Category::AttnOutput: type = attn_output_type(preset, type); break;
      default: break;
    }
    choices[index] = {fit_rows(type, row), type};
  }
  return choices;
}

}  // namespace pagoda
