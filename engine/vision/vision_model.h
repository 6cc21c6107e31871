#pragma once
// A vision projector file, as llama.cpp writes it (`mmproj-*.gguf`: `clip.*` metadata, `v.*`
// encoder and `mm.*` projector tensors): the image encoder (a ViT: CLIP's, SigLIP's or
// Qwen2-VL's) and the projector that maps its outputs into the language model's embedding
// space, one row per image token.
//
// Both layouts llama.cpp has used are read: the older examples/llava one (clip.has_llava_projector,
// clip.has_qwen2vl_merger, a "qwen2vl_merger" projector_type, the FFN's two matrices named the
// wrong way round) and the current tools/mtmd one (clip.projector_type "gemma3",
// "qwen2.5vl_merger", ...; clip.vision.feature_layer, wa_layer_indexes). As with the language
// model, matrices stay in their file encoding (F32, F16, BF16, Q8_0) as views into the mapping;
// small vectors are decoded to f32 at load.

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/gguf/mapped_file.h"
#include "engine/model/weight_tensor.h"

namespace pagoda {

// Which projector, and so which encoder, preprocessing and prompt layout, the file holds.
enum class ProjectorType {
  LlavaMlp,  // "mlp": CLIP ViT, the penultimate layer's patch rows, Linear → GELU → Linear (LLaVA 1.5, BakLLaVA, ...)
  Gemma3,    // "gemma3": SigLIP ViT, 4×4 average pooling to 256 tokens, RMSNorm, a linear projection
  Qwen2VL,   // "qwen2vl_merger": Qwen2-VL's ViT (2-D RoPE, dynamic resolution), 2×2 patch merger
  Qwen25VL,  // "qwen2.5vl_merger": the same with RMSNorm, a gated SiLU FFN and window attention
};
const char* projector_type_name(ProjectorType type);  // the file's clip.projector_type string

// The encoder blocks' FFN activation: clip.use_gelu (GELU, tanh approximation as ggml_gelu),
// clip.use_silu, else CLIP's quick GELU x·σ(1.702·x).
enum class VisionActivation { Gelu, Silu, QuickGelu };

struct VisionConfig {
  ProjectorType projector = ProjectorType::LlavaMlp;
  int32_t image_size = 0;  // clip.vision.image_size: the square side a fixed-size encoder takes
  int32_t patch_size = 0;  // clip.vision.patch_size
  int32_t dim = 0;         // clip.vision.embedding_length
  int32_t ffn_dim = 0;     // clip.vision.feed_forward_length
  int32_t n_heads = 0;     // clip.vision.attention.head_count
  int32_t n_layers = 0;    // clip.vision.block_count: blocks in the file
  // Blocks the encoder runs: LLaVA's n_layers - 1 (its features are the penultimate block's
  // output, as llama.cpp computes them), or up to the deepest clip.vision.feature_layer; every
  // block for the others.
  int32_t layers_run = 0;
  float eps = 1e-6f;  // clip.vision.attention.layer_norm_epsilon (LayerNorm, or RMSNorm for Qwen2.5-VL)
  std::array<float, 3> image_mean{}, image_std{};  // clip.vision.image_mean / image_std, per RGB channel
  VisionActivation activation = VisionActivation::QuickGelu;
  int32_t projection_dim = 0;  // width of the rows the projector outputs: the language model's dim
  // Gemma 3: image tokens per image (256): the (image_size / patch_size)² patch grid is average
  // pooled in square windows down to this many.
  int32_t tokens_per_image = 0;
  // Qwen2-VL: patches merged side by side into one token (2: each token is a 2×2 block).
  int32_t spatial_merge = 1;
  // Qwen2.5-VL: window attention's window in pixels (clip.vision.window_size, 112), and the
  // blocks that attend over the whole image instead (wa_layer_indexes, or every n_wa_pattern-th).
  int32_t window_size = 0;
  std::vector<int32_t> full_attention_layers;
  // Qwen2-VL: the bounds of the pixel count its preprocessing resizes an image into
  // (clip.vision.image_min_pixels / image_max_pixels; 0: the model's published defaults).
  int64_t min_pixels = 0, max_pixels = 0;

  // Patches along a side of a fixed-size image, and image tokens a fixed-size image gives
  // (LLaVA: the patch grid; Gemma 3: tokens_per_image).
  int32_t patches_per_side() const { return patch_size > 0 ? image_size / patch_size : 0; }
  int32_t head_dim() const { return n_heads > 0 ? dim / n_heads : 0; }
};

// One encoder block (pre-norm: x += attn(norm1(x)); x += ffn(norm2(x))). Matrices are row-major
// [out][in]. Biases and norm biases a family does not have are empty.
struct VisionLayerWeights {
  std::vector<float> ln1, ln1_bias;  // [dim]: LayerNorm (RMSNorm without bias for Qwen2.5-VL)
  WeightTensor q, k, v, o;           // [dim][dim]
  std::vector<float> q_bias, k_bias, v_bias, o_bias;
  std::vector<float> ln2, ln2_bias;
  // The FFN: down(act(up·x + b)) (+ b), or Qwen2.5-VL's down(silu(gate·x + b) · (up·x + b)) (+ b).
  // Older files name up "ffn_down" and down "ffn_up"; the loader tells them apart by shape.
  WeightTensor ffn_up;    // [ffn_dim][dim]
  WeightTensor ffn_gate;  // [ffn_dim][dim], or empty
  WeightTensor ffn_down;  // [dim][ffn_dim]
  std::vector<float> ffn_up_bias, ffn_gate_bias, ffn_down_bias;
};

struct VisionWeights {
  // The patch embedding, a conv with stride patch_size, as a matrix: row d holds output d's
  // kernel over a patch's values channel by channel (R, G, B), each channel row by row:
  // [dim][3 · patch_size · patch_size] (the file's [patch, patch, 3, dim] tensor, unchanged).
  WeightTensor patch_embd;
  WeightTensor patch_embd_1;      // Qwen2-VL: the kernel of the second frame (an image is both frames); or empty
  std::vector<float> patch_bias;  // [dim], or empty
  std::vector<float> class_embd;  // [dim] (CLIP), or empty
  WeightTensor position_embd;     // [positions][dim] learned positions (CLIP, SigLIP), or empty (Qwen: RoPE)
  std::vector<float> pre_ln, pre_ln_bias;    // [dim], or empty
  std::vector<VisionLayerWeights> layers;    // n_layers
  std::vector<float> post_ln, post_ln_bias;  // [dim] (SigLIP's post LayerNorm; Qwen's merger norm ln_q), or empty

  // The projector. LLaVA: mm.0 ([hidden][dim]), GELU, mm.2 ([projection_dim][hidden]). Qwen2-VL:
  // mm.0 ([4·dim][4·dim]), GELU, then mm.2 (older files) or mm.1 (newer), [projection_dim][4·dim],
  // both held in mm_0 and mm_2 here.
  WeightTensor mm_0, mm_2;
  std::vector<float> mm_0_bias, mm_2_bias;
  // Gemma 3: RMSNorm weight of the pooled rows (mm.soft_emb_norm, stored as 1 + w as Gemma's norm
  // applies it), then the projection [projection_dim][dim]: mm.input_projection.weight is stored
  // [dim][projection_dim] (x·W), so the loader keeps a transposed f32 copy here.
  std::vector<float> mm_soft_emb_norm;
  WeightTensor mm_input_projection;
};

struct VisionModel {
  std::string path;
  VisionConfig config;
  VisionWeights weights;
  // What the weight views point into: the mapped file, and copies the loader made (the
  // transposed Gemma 3 projection).
  std::shared_ptr<const void> storage;
  const MappedFile* file = nullptr;
  // The file's contents hashed (contents_hash) by the engine that serves it (load_vision), 0
  // otherwise: its images' rows, and so the prefix cache's keys of their pages, depend on them.
  uint64_t fingerprint = 0;
};

// Loads a projector file. Throws pagoda::Error naming the file and what is wrong: not a GGUF,
// no vision encoder, an unknown or unsupported projector type (naming it and the supported
// ones), a missing or misshapen tensor, a tensor type the kernels do not read, hyperparameters
// that do not fit together.
VisionModel load_projector(const std::string& path, MappedFile::Load load = MappedFile::Load::Map);

}  // namespace pagoda
