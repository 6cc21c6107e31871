// LoRA adapters in llama.cpp's GGUF format (what convert_lora_to_gguf.py writes and
// llama-adapter.cpp reads), checked as strictly as llama.cpp checks them, so a file pagoda
// accepts is one llama.cpp would accept for the same base model.

#include "engine/lora/lora_adapter.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "engine/gguf/gguf.h"
#include "pagoda/error.h"

namespace pagoda {

namespace {

constexpr const char* kProjectionNames[kLoraProjections] = {"attn_q",   "attn_k", "attn_v",  "attn_output",
                                                            "ffn_gate", "ffn_up", "ffn_down"};
constexpr std::string_view kSuffixA = ".lora_a", kSuffixB = ".lora_b";

std::string shape_str(const std::vector<uint64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Floats as people write them: "3e+38", not std::to_string's forty digits.
std::string num(float x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", double(x));
  return buf;
}

std::string tensor_error(const GgufFile& f, std::string_view name, const std::string& what) {
  return f.path() + ": tensor '" + std::string(name) + "'" + what;
}

void check_kind(const GgufFile& f, const ModelConfig& base) {
  const std::optional<std::string> type = f.get_string_opt("general.type");
  if (type != "adapter") {
    throw Error(f.path() + ": not an adapter (general.type is " + (type ? "'" + *type + "'" : "missing") +
                ", expected 'adapter')");
  }
  const std::string adapter_type = f.get_string("adapter.type");
  if (adapter_type != "lora") {
    throw Error(f.path() + ": adapter type '" + adapter_type + "' is not supported (only 'lora')");
  }
  // As llama.cpp: an adapter is made for one architecture, the base model's.
  const std::string arch = f.get_string("general.architecture");
  const std::string want = architecture_name(base.arch);
  if (arch != want) {
    throw Error(f.path() + ": general.architecture is '" + arch + "' but the base model is '" + want + "'");
  }
}

float read_alpha(const GgufFile& f) {
  // llama.cpp's default: without alpha the scale is the user's scale alone.
  const float alpha = f.get_float_opt("adapter.lora.alpha").value_or(0.0f);
  if (!std::isfinite(alpha)) throw Error(f.path() + ": adapter.lora.alpha = " + num(alpha) + " is not finite");
  return alpha;
}

struct TargetId {
  uint64_t layer;
  LoraProjection projection;
};

// "blk.N.<projection>.weight", spelled exactly as llama.cpp names the base tensor, or nothing.
std::optional<TargetId> parse_target(std::string_view stem) {
  constexpr std::string_view prefix = "blk.", suffix = ".weight";
  if (!stem.starts_with(prefix) || !stem.ends_with(suffix)) return std::nullopt;
  const std::string_view middle = stem.substr(prefix.size(), stem.size() - prefix.size() - suffix.size());
  const size_t dot = middle.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  uint64_t layer = 0;
  const auto [end, ec] = std::from_chars(middle.data(), middle.data() + dot, layer);
  if (ec != std::errc() || end != middle.data() + dot) return std::nullopt;
  if (std::to_string(layer) != middle.substr(0, dot)) return std::nullopt;  // "blk.01" is no base tensor
  const std::string_view name = middle.substr(dot + 1);
  for (int32_t p = 0; p < kLoraProjections; ++p) {
    if (name == kProjectionNames[p]) return TargetId{layer, LoraProjection(p)};
  }
  return std::nullopt;
}

// The base tensor's name for a LoRA tensor's name, or nothing when it names no LoRA half.
std::optional<std::string_view> lora_stem(std::string_view name) {
  if (!name.ends_with(kSuffixA) && !name.ends_with(kSuffixB)) return std::nullopt;
  return name.substr(0, name.size() - kSuffixA.size());
}

TargetId find_target(const GgufFile& f, const std::string& a_name, std::string_view stem, const ModelConfig& base) {
  const std::optional<TargetId> id = parse_target(stem);
  if (!id) {
    const std::string what = ": LoRA on '" + std::string(stem) +
                             "' is not supported (only blk.N.{attn_q,attn_k,"
                             "attn_v,attn_output,ffn_gate,ffn_up,ffn_down}.weight)";
    throw Error(tensor_error(f, a_name, what));
  }
  if (id->layer >= uint64_t(base.n_layers)) {
    const std::string what = ": block " + std::to_string(id->layer) + " does not exist (the base model has " +
                             std::to_string(base.n_layers) + " blocks)";
    throw Error(tensor_error(f, a_name, what));
  }
  return *id;
}

std::vector<float> read_values(const GgufFile& f, const GgufTensorInfo& t) {
  std::vector<float> v = f.read_f32(t);
  // One NaN would silently poison every token generated with the adapter.
  if (!std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); })) {
    throw Error(tensor_error(f, t.name, " holds a non-finite value"));
  }
  return v;
}

// Checks a and b as llama.cpp does: a is {n_in, rank}, b is {rank, n_out} in GGUF order.
LoraTarget read_target(const GgufFile& f, const GgufTensorInfo& a, const GgufTensorInfo& b, std::string_view stem,
                       LoraShape want, float alpha, float user_scale) {
  for (const GgufTensorInfo* t : {&a, &b}) {
    if (t->shape.size() != 2) {
      throw Error(tensor_error(f, t->name, " has shape " + shape_str(t->shape) + "; LoRA tensors are matrices"));
    }
  }
  if (a.shape[0] != uint64_t(want.n_in) || b.shape[1] != uint64_t(want.n_out)) {
    throw Error(f.path() + ": tensors '" + a.name + "' " + shape_str(a.shape) + " and '" + b.name + "' " +
                shape_str(b.shape) + " do not fit the base model's '" + std::string(stem) + "' of shape [" +
                std::to_string(want.n_in) + ", " + std::to_string(want.n_out) + "] (expected lora_a [" +
                std::to_string(want.n_in) + ", rank] and lora_b [rank, " + std::to_string(want.n_out) + "])");
  }
  // GgufFile refuses zero dimensions, so the rank is at least 1.
  const uint64_t rank = a.shape[1];
  if (b.shape[0] != rank) {
    throw Error(f.path() + ": tensors '" + a.name + "' and '" + b.name + "' disagree on the rank (" +
                std::to_string(rank) + " and " + std::to_string(b.shape[0]) + "; is lora_a not transposed?)");
  }
  if (rank > uint64_t(INT32_MAX)) {
    throw Error(tensor_error(f, a.name, " has rank " + std::to_string(rank) + ", out of range"));
  }
  const float scale = (alpha != 0.0f ? alpha / float(rank) : 1.0f) * user_scale;
  if (!std::isfinite(scale)) {
    throw Error(f.path() + ": the scale of '" + std::string(stem) + "' (alpha " + num(alpha) + " / rank " +
                std::to_string(rank) + " × " + num(user_scale) + ") is not finite");
  }
  const bool sixteen_bit = a.type == b.type && (a.type == GgmlType::F16 || a.type == GgmlType::BF16);
  return {int32_t(rank),
          want.n_in,
          want.n_out,
          scale,
          read_values(f, a),
          read_values(f, b),
          sixteen_bit ? a.type : GgmlType::F32};
}

}  // namespace

const char* lora_projection_name(LoraProjection p) { return kProjectionNames[size_t(p)]; }

LoraShape lora_projection_shape(const ModelConfig& c, LoraProjection p) {
  const int32_t q_dim = c.n_heads * c.head_dim();
  switch (p) {
    case LoraProjection::Q: return {c.dim, q_dim};
    case LoraProjection::K:
    case LoraProjection::V: return {c.dim, c.kv_dim()};
    case LoraProjection::Output: return {q_dim, c.dim};
    case LoraProjection::Gate:
    case LoraProjection::Up: return {c.dim, c.ffn_dim};
    case LoraProjection::Down: return {c.ffn_dim, c.dim};
  }
  return {};
}

LoraAdapter load_lora_adapter(const std::string& path, const ModelConfig& base, float user_scale) {
  if (!std::isfinite(user_scale)) throw Error(path + ": the adapter scale " + num(user_scale) + " is not finite");
  const GgufFile f = GgufFile::open(path);
  check_kind(f, base);
  LoraAdapter adapter{path, read_alpha(f), user_scale, {}};
  adapter.layers.resize(size_t(base.n_layers));
  bool any = false;
  for (const GgufTensorInfo& t : f.tensors()) {
    const std::optional<std::string_view> stem = lora_stem(t.name);
    if (!stem) throw Error(tensor_error(f, t.name, " is not a LoRA tensor (names end in .lora_a or .lora_b)"));
    const std::string a_name = std::string(*stem).append(kSuffixA), b_name = std::string(*stem).append(kSuffixB);
    const GgufTensorInfo* a = f.find_tensor(a_name);
    const GgufTensorInfo* b = f.find_tensor(b_name);
    if (!a || !b) throw Error(tensor_error(f, t.name, " has no matching '" + (a ? b_name : a_name) + "'"));
    if (&t != a) continue;  // each pair once, at its lora_a
    const TargetId id = find_target(f, a_name, *stem, base);
    adapter.layers[id.layer][size_t(id.projection)] =
        read_target(f, *a, *b, *stem, lora_projection_shape(base, id.projection), adapter.alpha, user_scale);
    any = true;
  }
  if (!any) throw Error(path + ": the adapter has no LoRA tensors");
  // The weights were copied out of the mapping, which closes here: a file truncated while
  // they were read gave zeros, and is refused rather than loaded.
  f.check_intact();
  return adapter;
}

}  // namespace pagoda
