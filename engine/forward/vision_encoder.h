#pragma once
// The vision encoder's forward pass: normalized pixel planes in, the language model's image
// embeddings out (a ViT, then its projector), for the families of engine/vision/vision_model.h:
//   LLaVA (CLIP):  patch embedding, class row, learned positions, pre-LayerNorm, the blocks up to
//                  layers_run, the patch rows through mm.0 → GELU → mm.2;
//   Gemma 3:       SigLIP (patch bias, learned positions, every block, post-LayerNorm), average
//                  pooling of the patch grid to tokens_per_image, RMSNorm, the input projection;
//   Qwen2-VL:      both temporal kernels on the image, patches in 2×2-merge order, 2-D RoPE,
//                  the merger (ln_q, four patch rows side by side, mm.0 → GELU → mm.2);
//   Qwen2.5-VL:    the same with RMSNorm, a gated SiLU FFN, and window attention in the blocks
//                  not listed in full_attention_layers.
// Images of one call are stacked into the rows of every GEMM; attention, pooling and merging
// stay within an image (or within a window of it).
//
// Batch invariance: an image's embeddings are bit-for-bit the same whatever other images share
// the call and whatever the thread count: every GEMM output depends only on its row (kernels/
// gemm.h, kernels/quant/weight_matrix.h), LayerNorm and RMSNorm reduce each row alone in a
// fixed order, RoPE turns a row by its own patch position, attention reads only its image's
// (window's) rows in a fixed order, and pooling sums each window in a fixed order.

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include <tbb/task_arena.h>

#include "engine/forward/vision_attention.h"
#include "engine/image/image.h"
#include "engine/vision/vision_model.h"
#include "kernels/quant/weight_matrix.h"

namespace pagoda {

class VisionEncoder {
 public:
  // Packs the model's matrices for the active kernels, in `arena`, whose threads every encode
  // runs on too (the language model's: ModelRunner::arena()). Throws pagoda::Error when the
  // model's hyperparameters cannot be run (a head size RoPE cannot split, a patch grid the
  // pooling does not divide, too few learned positions). The model and the arena must outlive
  // the encoder.
  VisionEncoder(const VisionModel& model, tbb::task_arena& arena);

  // Encodes `images` together: `out` gets each image's token rows of projection_dim floats,
  // image after image, and `tokens` each image's row count (image_tokens of its size). Throws
  // pagoda::Error naming the image and the problem for an empty image, planes of the wrong size,
  // a size the family does not take (LLaVA and Gemma 3: image_size square; Qwen: sides that are
  // multiples of patch_size · spatial_merge), or weights lost with the file. Not reentrant: one
  // call at a time per encoder.
  void encode(std::span<const PixelPlanes* const> images, std::vector<float>& out, std::vector<int32_t>& tokens);
  void encode(std::span<const PixelPlanes> images, std::vector<float>& out, std::vector<int32_t>& tokens);

  // Throws pagoda::Error, as encode would, unless an image of this size can be encoded.
  void check_size(int32_t width, int32_t height) const;
  // Image tokens an image of this size gives (its size must pass check_size).
  int32_t image_tokens(int32_t width, int32_t height) const;
  // Floating-point operations of encoding one image of this size: the GEMMs' and attention's
  // multiply-adds counted as two (norms and activations left out), for the scheduler's budget.
  double flops(int32_t width, int32_t height) const;

  const VisionConfig& config() const { return model_.config; }

 private:
  struct PackedLayer {
    kernels::WeightMatrix qkv;    // [3 dim][dim]
    std::vector<float> qkv_bias;  // [3 dim], or empty
    kernels::WeightMatrix output;
    bool gated = false;          // Qwen2.5-VL: act(gate·x + b) · (up·x + b)
    kernels::WeightMatrix up;    // [ffn][dim], or a gated FFN's gate and up: [2 ffn][dim]
    std::vector<float> up_bias;  // [ffn] or [2 ffn] (gate's, then up's), or empty
    kernels::WeightMatrix down;
  };
  // A window of Qwen2.5-VL's window attention, in merged units: columns [x, x + w), rows [y, y + h).
  struct UnitWindow {
    int32_t x = 0, y = 0, w = 0, h = 0;
  };
  // One image's rows in this call.
  struct ImageRows {
    int32_t first_row = 0, rows = 0;      // encoder rows (LLaVA: its patches and the class row)
    int32_t grid_w = 0, grid_h = 0;       // patches per row and column
    int32_t first_token = 0, tokens = 0;  // rows of the output
  };

  // The windows of a units_w × units_h grid of merged units, row-major, the edge ones partial:
  // one, the whole grid, without window attention.
  std::vector<UnitWindow> windows(int32_t units_w, int32_t units_h) const;
  // Lays out the rows of every image: row_patch_, segments, unit_token_, rope positions.
  void plan(std::span<const PixelPlanes* const> images);
  void embed_patches(std::span<const PixelPlanes* const> images);
  void run_block(int32_t layer);
  void norm_rows(const float* in, float* out, int32_t rows, const std::vector<float>& weight,
                 const std::vector<float>& bias) const;
  void activate(float* row, int32_t n) const;
  // The projector, from x_ (the encoder's last rows) into out.
  void project(std::vector<float>& out);
  void project_llava(std::vector<float>& out);
  void project_gemma3(std::vector<float>& out);
  void project_qwen(std::vector<float>& out);

  const VisionModel& model_;
  tbb::task_arena& arena_;
  bool rms_norm_ = false;             // Qwen2.5-VL: RMSNorm (no bias) instead of LayerNorm
  bool qwen_ = false;                 // Qwen2-VL and Qwen2.5-VL: dynamic size, RoPE, the merger
  int32_t merge_ = 1;                 // Qwen: patches merged per side (spatial_merge)
  int32_t window_units_ = 0;          // Qwen2.5-VL: merged units per window side; 0: no windows
  std::vector<bool> full_attention_;  // per layer: attends over the whole image
  kernels::WeightMatrix patch_embd_, patch_embd_1_;
  std::vector<float> positions_;  // learned positions, [positions][dim]; empty for Qwen
  std::vector<PackedLayer> layers_;
  kernels::WeightMatrix mm_0_, mm_2_;
  std::unique_ptr<VisionRope> rope_;  // Qwen

  // Per-call layout and scratch, grown on demand and reused.
  std::vector<ImageRows> images_;
  std::vector<int32_t> row_patch_;  // each encoder row's patch (y · grid_w + x) in its image; -1: the class row
  std::vector<int32_t> row_image_;
  std::vector<AttentionSegment> full_segments_, window_segments_;
  std::vector<int32_t> unit_token_;       // Qwen: each merged unit (4 rows, in row order), its output row
  std::vector<int32_t> rope_y_, rope_x_;  // Qwen: each row's patch coordinates
  int32_t rows_ = 0, tokens_ = 0;
  std::vector<float> x_, norm_, qkv_, att_, sublayer_, ffn_, patches_, projected_;
  AttentionScratch attention_scratch_;
};

}  // namespace pagoda
