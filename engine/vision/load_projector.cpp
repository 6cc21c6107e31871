// Projector files' tensors, by llama.cpp's names (v.* for the encoder, mm.* for the projector),
// each shape checked against the metadata (vision_config.cpp) before anything is read, so a
// hostile file fails before the loader allocates for it.

#include <memory>

#include "engine/gguf/gguf.h"
#include "engine/model/gguf_layers.h"
#include "engine/vision/vision_config.h"
#include "engine/vision/vision_model.h"
#include "pagoda/error.h"

namespace pagoda {

namespace {

// What a VisionModel's views point into: the mapped file and the loader's own copies.
struct ProjectorStorage {
  explicit ProjectorStorage(GgufFile f) : file(std::move(f)) {}
  GgufFile file;
  std::vector<float> input_projection;  // Gemma 3's projection, transposed to [projection_dim][dim]
};

bool is_qwen(ProjectorType t) { return t == ProjectorType::Qwen2VL || t == ProjectorType::Qwen25VL; }

// The types the encoder's kernels read; anything else is refused, naming the tensor.
void check_type(const GgufFile& f, const GgufTensorInfo& t) {
  switch (t.type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q8_0: return;
    default: break;
  }
  throw Error(f.path() + ": tensor '" + t.name + "' has type " + ggml_type_name(t.type) +
              ", which projector files may not have (supported: F32, F16, BF16, Q8_0)");
}

const GgufTensorInfo& checked(const GgufFile& f, const std::string& name, const std::vector<uint64_t>& shape) {
  const GgufTensorInfo& t = find_checked(f, name, shape);
  check_type(f, t);
  return t;
}

// Any tensor's bytes as a [rows][cols] matrix (its shape checked by the caller).
WeightTensor view(const GgufFile& f, const GgufTensorInfo& t, uint64_t rows, uint64_t cols) {
  return WeightTensor{t.type, f.tensor_bytes(t).data(), int64_t(rows), int64_t(cols), f.file().maps_file()};
}

WeightTensor matrix(const GgufFile& f, const std::string& name, uint64_t rows, uint64_t cols) {
  return view(f, checked(f, name, {cols, rows}), rows, cols);
}

std::vector<float> vec(const GgufFile& f, const std::string& name, uint64_t n) {
  return f.read_f32(checked(f, name, {n}));
}

std::vector<float> optional_vec(const GgufFile& f, const std::string& name, uint64_t n) {
  return f.find_tensor(name) ? vec(f, name, n) : std::vector<float>{};
}

// The free side of the 2-D tensor `name` whose side `axis` (GGUF order: 0 innermost) must be
// `size`: a projector's width, which only the tensor's shape gives. Bounded, as all the file says.
int32_t free_side(const GgufFile& f, const std::string& name, size_t axis, uint64_t size) {
  const GgufTensorInfo* t = f.find_tensor(name);
  if (!t) throw Error(f.path() + ": tensor '" + name + "' is missing");
  if (t->shape.size() != 2 || t->shape[axis] != size) {
    std::string shape, expected = axis == 0 ? std::to_string(size) + ", any" : "any, " + std::to_string(size);
    for (uint64_t d : t->shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    throw Error(f.path() + ": tensor '" + name + "' has shape [" + shape + "], expected [" + expected + "]");
  }
  check_type(f, *t);
  const uint64_t other = t->shape[1 - axis];
  if (other > uint64_t(kMaxVisionDim)) {
    throw Error(f.path() + ": tensor '" + name + "' is " + std::to_string(other) + " wide, more than " +
                std::to_string(kMaxVisionDim));
  }
  return int32_t(other);
}

int32_t rows_of(const GgufFile& f, const std::string& name, uint64_t cols) { return free_side(f, name, 0, cols); }

// The FFN's names and width. examples/llava's converters named fc1 (up, [ffn][dim], stored
// {dim, ffn}) "ffn_down" and fc2 "ffn_up"; like llama.cpp, a "ffn_down" shaped as an up matrix
// means the names are swapped. When the FFN is as wide as the model the shapes cannot tell, and
// the converter's keys decide.
struct FfnNames {
  std::string up, down;
  int32_t width;
};

FfnNames ffn_names(const GgufFile& f, const ProjectorMetadata& m) {
  const uint64_t dim = m.config.dim;
  const std::string p = "v.blk.0.";
  const GgufTensorInfo* down = f.find_tensor(p + "ffn_down.weight");
  if (!down) throw Error(f.path() + ": tensor '" + p + "ffn_down.weight' is missing");
  const bool swapped = down->shape.size() == 2 && down->shape[0] == dim && (down->shape[1] != dim || m.legacy);
  FfnNames n{swapped ? "ffn_down" : "ffn_up", swapped ? "ffn_up" : "ffn_down", 0};
  n.width = rows_of(f, p + n.up + ".weight", dim);
  if (m.ffn_dim_key > 0 && m.ffn_dim_key != n.width) {
    throw Error(f.path() + ": clip.vision.feed_forward_length = " + std::to_string(m.ffn_dim_key) +
                " but the FFN's matrices are " + std::to_string(n.width) + " wide");
  }
  return n;
}

VisionLayerWeights read_block(const GgufFile& f, const VisionConfig& c, const FfnNames& ffn, int32_t layer) {
  const std::string p = "v.blk." + std::to_string(layer) + ".";
  const uint64_t dim = c.dim, width = c.ffn_dim;
  VisionLayerWeights lw;
  lw.ln1 = vec(f, p + "ln1.weight", dim);
  lw.ln1_bias = optional_vec(f, p + "ln1.bias", dim);
  lw.q = matrix(f, p + "attn_q.weight", dim, dim);
  lw.k = matrix(f, p + "attn_k.weight", dim, dim);
  lw.v = matrix(f, p + "attn_v.weight", dim, dim);
  lw.o = matrix(f, p + "attn_out.weight", dim, dim);
  lw.q_bias = optional_vec(f, p + "attn_q.bias", dim);
  lw.k_bias = optional_vec(f, p + "attn_k.bias", dim);
  lw.v_bias = optional_vec(f, p + "attn_v.bias", dim);
  lw.o_bias = optional_vec(f, p + "attn_out.bias", dim);
  lw.ln2 = vec(f, p + "ln2.weight", dim);
  lw.ln2_bias = optional_vec(f, p + "ln2.bias", dim);
  lw.ffn_up = matrix(f, p + ffn.up + ".weight", width, dim);
  lw.ffn_up_bias = optional_vec(f, p + ffn.up + ".bias", width);
  // Qwen2.5-VL's FFN is gated; the others' have no gate.
  if (c.projector == ProjectorType::Qwen25VL || f.find_tensor(p + "ffn_gate.weight")) {
    lw.ffn_gate = matrix(f, p + "ffn_gate.weight", width, dim);
    lw.ffn_gate_bias = optional_vec(f, p + "ffn_gate.bias", width);
  }
  lw.ffn_down = matrix(f, p + ffn.down + ".weight", dim, width);
  lw.ffn_down_bias = optional_vec(f, p + ffn.down + ".bias", dim);
  return lw;
}

// The patch embedding (a conv kernel {p, p, 3, dim} seen as [dim][3·p·p]), positions, norms.
void read_embeddings(const GgufFile& f, const VisionConfig& c, VisionWeights& w) {
  const uint64_t dim = c.dim, p = c.patch_size;
  w.patch_embd = view(f, checked(f, "v.patch_embd.weight", {p, p, 3, dim}), dim, 3 * p * p);
  if (is_qwen(c.projector))
    w.patch_embd_1 = view(f, checked(f, "v.patch_embd.weight.1", {p, p, 3, dim}), dim, 3 * p * p);
  w.patch_bias = optional_vec(f, "v.patch_embd.bias", dim);
  if (is_qwen(c.projector)) {
    // The merger's norm (ln_q): a LayerNorm for Qwen2-VL, an RMSNorm for Qwen2.5-VL.
    w.post_ln = vec(f, "v.post_ln.weight", dim);
    w.post_ln_bias = optional_vec(f, "v.post_ln.bias", dim);
    return;  // rotary positions; examples/llava's placeholder v.position_embd.weight is unused
  }
  if (c.projector == ProjectorType::LlavaMlp) w.class_embd = optional_vec(f, "v.class_embd", dim);
  const uint64_t side = c.patches_per_side();
  w.position_embd = matrix(f, "v.position_embd.weight", side * side + (w.class_embd.empty() ? 0 : 1), dim);
  w.pre_ln = optional_vec(f, "v.pre_ln.weight", dim);
  if (!w.pre_ln.empty()) w.pre_ln_bias = optional_vec(f, "v.pre_ln.bias", dim);
  w.post_ln = optional_vec(f, "v.post_ln.weight", dim);
  if (!w.post_ln.empty()) w.post_ln_bias = optional_vec(f, "v.post_ln.bias", dim);
}

// The projector's matrices; sets c.projection_dim from the last one's rows.
void read_projector(const GgufFile& f, VisionConfig& c, VisionWeights& w, ProjectorStorage& storage) {
  const uint64_t dim = c.dim;
  if (c.projector == ProjectorType::Gemma3) {
    // Stored {projection_dim, dim}: the model computes x·W. Kept transposed, as the others.
    const std::string name = "mm.input_projection.weight";
    c.projection_dim = free_side(f, name, 1, dim);
    const uint64_t out = c.projection_dim;
    const std::vector<float> stored = f.read_f32(*f.find_tensor(name));
    storage.input_projection.resize(out * dim);
    for (uint64_t i = 0; i < dim; ++i)
      for (uint64_t j = 0; j < out; ++j) storage.input_projection[j * dim + i] = stored[i * out + j];
    w.mm_input_projection =
        WeightTensor{GgmlType::F32, reinterpret_cast<const std::byte*>(storage.input_projection.data()), int64_t(out),
                     int64_t(dim), false};
    w.mm_soft_emb_norm = vec(f, "mm.soft_emb_norm.weight", dim);
    return;
  }
  // LLaVA: [hidden][dim] then [projection_dim][hidden]. Qwen: the merged 2x2 patches'
  // [4·dim][4·dim], then [projection_dim][4·dim], named mm.2 by every converter llama.cpp
  // reads and mm.1 by some others.
  const uint64_t in = is_qwen(c.projector) ? dim * uint64_t(c.spatial_merge * c.spatial_merge) : dim;
  const uint64_t hidden = is_qwen(c.projector) ? in : uint64_t(rows_of(f, "mm.0.weight", in));
  w.mm_0 = matrix(f, "mm.0.weight", hidden, in);
  w.mm_0_bias = optional_vec(f, "mm.0.bias", hidden);
  const std::string second = !is_qwen(c.projector) || f.find_tensor("mm.2.weight") ? "mm.2" : "mm.1";
  c.projection_dim = rows_of(f, second + ".weight", hidden);
  w.mm_2 = matrix(f, second + ".weight", c.projection_dim, hidden);
  w.mm_2_bias = optional_vec(f, second + ".bias", c.projection_dim);
}

}  // namespace

VisionModel load_projector(const std::string& path, MappedFile::Load load) {
  auto storage = std::make_shared<ProjectorStorage>(GgufFile::open(path, load));
  const GgufFile& f = storage->file;
  const ProjectorMetadata m = read_projector_metadata(f);
  VisionConfig c = m.config;
  VisionWeights w;
  read_embeddings(f, c, w);
  read_projector(f, c, w, *storage);
  if (m.projection_dim_key > 0 && m.projection_dim_key != c.projection_dim) {
    throw Error(path + ": clip.vision.projection_dim = " + std::to_string(m.projection_dim_key) +
                " but the projector outputs " + std::to_string(c.projection_dim) + " values");
  }
  const FfnNames ffn = ffn_names(f, m);
  c.ffn_dim = ffn.width;
  check_projector_widths(c, path);
  w.layers.reserve(size_t(c.n_layers));
  for (int32_t l = 0; l < c.n_layers; ++l) w.layers.push_back(read_block(f, c, ffn, l));
  f.check_intact();  // the norms and biases above were read from the file
  const MappedFile* mapping = &f.file();
  return VisionModel{path, std::move(c), std::move(w), std::move(storage), mapping};
}

}  // namespace pagoda
