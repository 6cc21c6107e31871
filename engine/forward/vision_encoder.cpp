#include "engine/forward/vision_encoder.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string>
#include <utility>

#include "engine/forward/encoder_rows.h"
#include "engine/forward/pack_weights.h"
#include "kernels/ops.h"
#include "pagoda/error.h"

namespace pagoda {

namespace {

std::string size_text(int32_t width, int32_t height) { return std::to_string(width) + "×" + std::to_string(height); }

// A family's biases laid side by side for a fused GEMM: each part's, or zeros where a part has
// none; empty when no part has one.
std::vector<float> fused_bias(std::initializer_list<std::pair<const std::vector<float>*, int64_t>> parts) {
  std::vector<float> bias;
  bool any = false;
  for (const auto& [b, rows] : parts) {
    any = any || !b->empty();
    if (b->empty()) bias.insert(bias.end(), size_t(rows), 0.0f);
    else bias.insert(bias.end(), b->begin(), b->end());
  }
  return any ? bias : std::vector<float>{};
}

}  // namespace

VisionEncoder::VisionEncoder(const VisionModel& model, tbb::task_arena& arena) : model_(model), arena_(arena) {
  const VisionConfig& c = model.config;
  const VisionWeights& w = model.weights;
  qwen_ = c.projector == ProjectorType::Qwen2VL || c.projector == ProjectorType::Qwen25VL;
  rms_norm_ = c.projector == ProjectorType::Qwen25VL;
  merge_ = qwen_ ? c.spatial_merge : 1;
  auto fail = [&](const std::string& what) { throw Error(model.path + ": vision encoder: " + what); };
  if (c.dim <= 0 || c.n_heads <= 0 || c.dim % c.n_heads != 0 || c.patch_size <= 0 || merge_ <= 0)
    fail("dim, heads, patch size or merge do not fit together");
  if (c.layers_run < 0 || c.layers_run > int32_t(w.layers.size())) fail("layers_run exceeds the blocks in the file");
  const bool projector = c.projector == ProjectorType::Gemma3
                             ? !w.mm_input_projection.empty() && !w.mm_soft_emb_norm.empty()
                             : !w.mm_0.empty() && !w.mm_2.empty();
  if (!projector) fail("the projector's tensors are missing");
  if (c.projector == ProjectorType::LlavaMlp && w.class_embd.size() != size_t(c.dim)) fail("no class embedding");
  if (qwen_) {
    if (c.head_dim() % 4 != 0) fail("2-D RoPE needs a head size divisible by 4, not " + std::to_string(c.head_dim()));
    rope_ = std::make_unique<VisionRope>(c.head_dim());
    if (c.projector == ProjectorType::Qwen25VL && c.window_size > 0) {
      window_units_ = c.window_size / c.patch_size / merge_;
      if (window_units_ <= 0) fail("window_size " + std::to_string(c.window_size) + " is less than a merged unit");
    }
  } else {
    const int32_t side = c.patches_per_side();
    if (side <= 0 || c.image_size % c.patch_size != 0) fail("image_size is not whole patches");
    const int64_t needed = int64_t(side) * side + (c.projector == ProjectorType::LlavaMlp ? 1 : 0);
    if (w.position_embd.rows < needed) fail("fewer learned positions than patches");
    if (c.projector == ProjectorType::Gemma3) {
      const auto out_side = int32_t(std::lround(std::sqrt(double(c.tokens_per_image))));
      if (c.tokens_per_image <= 0 || out_side * out_side != c.tokens_per_image || side % out_side != 0)
        fail("a " + std::to_string(side) + "² patch grid does not pool to " + std::to_string(c.tokens_per_image));
    }
    positions_ = w.position_embd.to_f32();
  }
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const auto& full = c.full_attention_layers;
    full_attention_.push_back(window_units_ == 0 || std::find(full.begin(), full.end(), int32_t(l)) != full.end());
  }
  arena_.execute([&] {
    patch_embd_ = pack_weights({&w.patch_embd});
    if (qwen_ && !w.patch_embd_1.empty()) patch_embd_1_ = pack_weights({&w.patch_embd_1});
    layers_.resize(size_t(c.layers_run));
    tbb::parallel_for(0, c.layers_run, [&](int32_t l) {
      const VisionLayerWeights& lw = w.layers[size_t(l)];
      PackedLayer& p = layers_[size_t(l)];
      p.qkv = pack_weights({&lw.q, &lw.k, &lw.v});
      p.qkv_bias = fused_bias({{&lw.q_bias, lw.q.rows}, {&lw.k_bias, lw.k.rows}, {&lw.v_bias, lw.v.rows}});
      p.output = pack_weights({&lw.o});
      if (lw.ffn_gate.empty()) {
        p.up = pack_weights({&lw.ffn_up});
        p.up_bias = lw.ffn_up_bias;
      } else {
        p.gated = true;
        p.up = pack_weights({&lw.ffn_gate, &lw.ffn_up});
        p.up_bias = fused_bias({{&lw.ffn_gate_bias, lw.ffn_gate.rows}, {&lw.ffn_up_bias, lw.ffn_up.rows}});
      }
      p.down = pack_weights({&lw.ffn_down});
    });
    if (c.projector == ProjectorType::Gemma3) {
      mm_0_ = pack_weights({&w.mm_input_projection});
    } else {
      mm_0_ = pack_weights({&w.mm_0});
      mm_2_ = pack_weights({&w.mm_2});
    }
  });
}

void VisionEncoder::check_size(int32_t width, int32_t height) const {
  const VisionConfig& c = model_.config;
  if (width <= 0 || height <= 0) throw Error("vision encoder: the image is empty (" + size_text(width, height) + ")");
  if (qwen_) {
    const int32_t unit = c.patch_size * merge_;
    if (width % unit != 0 || height % unit != 0) {
      throw Error("vision encoder: a " + size_text(width, height) + " image is not whole " + std::to_string(unit) +
                  "-pixel units (" + projector_type_name(c.projector) + " takes sides that are multiples of " +
                  std::to_string(unit) + ")");
    }
    return;
  }
  if (width != c.image_size || height != c.image_size) {
    throw Error("vision encoder: a " + size_text(width, height) + " image; " + projector_type_name(c.projector) +
                " takes " + size_text(c.image_size, c.image_size) + " only");
  }
}

int32_t VisionEncoder::image_tokens(int32_t width, int32_t height) const {
  const VisionConfig& c = model_.config;
  if (c.projector == ProjectorType::Gemma3) return c.tokens_per_image;
  const int32_t unit = c.patch_size * merge_;
  return (width / unit) * (height / unit);
}

std::vector<VisionEncoder::UnitWindow> VisionEncoder::windows(int32_t units_w, int32_t units_h) const {
  if (window_units_ == 0) return {{0, 0, units_w, units_h}};
  std::vector<UnitWindow> all;
  for (int32_t y = 0; y < units_h; y += window_units_)
    for (int32_t x = 0; x < units_w; x += window_units_)
      all.push_back({x, y, std::min(window_units_, units_w - x), std::min(window_units_, units_h - y)});
  return all;
}

double VisionEncoder::flops(int32_t width, int32_t height) const {
  check_size(width, height);
  const VisionConfig& c = model_.config;
  const double dim = c.dim, p = c.patch_size;
  const double patches = double(width / c.patch_size) * double(height / c.patch_size);
  const double rows = patches + (c.projector == ProjectorType::LlavaMlp ? 1 : 0);
  const double tokens = image_tokens(width, height);
  double total = 2 * rows * dim * 3 * p * p * (patch_embd_1_.rows() > 0 ? 2 : 1);
  // Attention's two GEMMs per layer: 2 · n² · dim multiply-adds over each segment of n rows.
  const double full = 4 * rows * rows * dim;
  double windowed = 0;
  const int32_t units_w = width / (c.patch_size * merge_), units_h = height / (c.patch_size * merge_);
  for (const UnitWindow& w : windows(units_w, units_h)) {
    const double n = double(w.w) * w.h * merge_ * merge_;
    windowed += 4 * n * n * dim;
  }
  for (int32_t l = 0; l < c.layers_run; ++l) {
    const PackedLayer& layer = layers_[size_t(l)];
    total += 2 * rows * dim * (layer.qkv.rows() + layer.output.rows());
    total += 2 * rows * (dim * layer.up.rows() + double(layer.down.cols()) * layer.down.rows());
    total += full_attention_[size_t(l)] ? full : windowed;
  }
  total += 2 * tokens * double(mm_0_.cols()) * mm_0_.rows();
  if (mm_2_.rows() > 0) total += 2 * tokens * double(mm_2_.cols()) * mm_2_.rows();
  return total;
}

void VisionEncoder::plan(std::span<const PixelPlanes* const> images) {
  const VisionConfig& c = model_.config;
  images_.clear();
  row_patch_.clear();
  row_image_.clear();
  full_segments_.clear();
  window_segments_.clear();
  unit_token_.clear();
  rope_y_.clear();
  rope_x_.clear();
  rows_ = tokens_ = 0;
  const bool class_row = c.projector == ProjectorType::LlavaMlp;
  for (size_t i = 0; i < images.size(); ++i) {
    ImageRows image;
    image.first_row = rows_;
    image.grid_w = images[i]->width / c.patch_size;
    image.grid_h = images[i]->height / c.patch_size;
    image.first_token = tokens_;
    image.tokens = image_tokens(images[i]->width, images[i]->height);
    if (class_row) row_patch_.push_back(-1);
    if (!qwen_) {
      for (int32_t p = 0; p < image.grid_w * image.grid_h; ++p) row_patch_.push_back(p);
    } else {
      // Qwen: each merged unit's m×m patches row-major, units row-major within a window, windows
      // row-major (one window, the whole image, without window attention): the order of
      // transformers' get_window_index, in which the blocks run and the merger reads its units.
      const int32_t units_w = image.grid_w / merge_;
      for (const UnitWindow& w : windows(units_w, image.grid_h / merge_)) {
        const auto first = int32_t(row_patch_.size());
        for (int32_t uy = w.y; uy < w.y + w.h; ++uy) {
          for (int32_t ux = w.x; ux < w.x + w.w; ++ux) {
            unit_token_.push_back(image.first_token + uy * units_w + ux);
            for (int32_t dy = 0; dy < merge_; ++dy) {
              for (int32_t dx = 0; dx < merge_; ++dx) {
                const int32_t y = uy * merge_ + dy, x = ux * merge_ + dx;
                row_patch_.push_back(y * image.grid_w + x);
                rope_y_.push_back(y);
                rope_x_.push_back(x);
              }
            }
          }
        }
        window_segments_.push_back({first, int32_t(row_patch_.size()) - first});
      }
    }
    image.rows = int32_t(row_patch_.size()) - rows_;
    row_image_.insert(row_image_.end(), size_t(image.rows), int32_t(i));
    full_segments_.push_back({image.first_row, image.rows});
    rows_ += image.rows;
    tokens_ += image.tokens;
    images_.push_back(image);
  }
}

// Each row's patch as one GEMM row (its 3·p·p values channel by channel, each row by row, the
// layout of patch_embd's rows), times the kernel (Qwen: plus the second frame's kernel on the
// same pixels, as the conv of both frames), plus the bias, with the class row (LLaVA) and the
// learned positions.
void VisionEncoder::embed_patches(std::span<const PixelPlanes* const> images) {
  const VisionConfig& c = model_.config;
  const VisionWeights& w = model_.weights;
  const int32_t p = c.patch_size, dim = c.dim, k = 3 * p * p;
  tbb::parallel_for(tbb::blocked_range<int32_t>(0, rows_, kRowGrain), [&](const tbb::blocked_range<int32_t>& range) {
    for (int32_t r = range.begin(); r < range.end(); ++r) {
      float* row = patches_.data() + size_t(r) * k;
      const int32_t patch = row_patch_[size_t(r)];
      if (patch < 0) {
        std::fill_n(row, k, 0.0f);
        continue;
      }
      const PixelPlanes& image = *images[size_t(row_image_[size_t(r)])];
      const int32_t grid_w = image.width / p, py = patch / grid_w, px = patch % grid_w;
      for (int32_t ch = 0; ch < 3; ++ch)
        for (int32_t ky = 0; ky < p; ++ky)
          std::copy_n(image.values.data() + (size_t(ch) * image.height + size_t(py * p + ky)) * image.width + px * p, p,
                      row + (ch * p + ky) * p);
    }
  });
  kernels::matmul(patches_.data(), rows_, k, patch_embd_, x_.data(), dim);
  if (patch_embd_1_.rows() > 0) kernels::matmul_accumulate(patches_.data(), rows_, k, patch_embd_1_, x_.data(), dim);
  const bool llava = c.projector == ProjectorType::LlavaMlp;
  tbb::parallel_for(tbb::blocked_range<int32_t>(0, rows_, kRowGrain), [&](const tbb::blocked_range<int32_t>& range) {
    for (int32_t r = range.begin(); r < range.end(); ++r) {
      float* row = x_.data() + size_t(r) * dim;
      const int32_t patch = row_patch_[size_t(r)];
      if (patch < 0) std::copy_n(w.class_embd.data(), dim, row);
      else if (!w.patch_bias.empty())
        for (int32_t j = 0; j < dim; ++j) row[j] += w.patch_bias[size_t(j)];
      if (positions_.empty()) continue;
      const float* position = positions_.data() + size_t(llava ? patch + 1 : patch) * dim;
      for (int32_t j = 0; j < dim; ++j) row[j] += position[j];
    }
  });
}

void VisionEncoder::norm_rows(const float* in, float* out, int32_t rows, const std::vector<float>& weight,
                              const std::vector<float>& bias) const {
  const VisionConfig& c = model_.config;
  if (rms_norm_) kernels::rmsnorm_rows(in, c.dim, weight.data(), out, c.dim, rows, c.dim, c.eps);
  else layer_norm_rows(in, out, rows, c.dim, weight, bias, c.eps);
}

void VisionEncoder::activate(float* row, int32_t n) const {
  switch (model_.config.activation) {
    case VisionActivation::Gelu: kernels::gelu(row, row, n); break;
    case VisionActivation::Silu:
      for (int32_t j = 0; j < n; ++j) row[j] = row[j] / (1.0f + std::exp(-row[j]));
      break;
    case VisionActivation::QuickGelu:
      for (int32_t j = 0; j < n; ++j) row[j] = row[j] / (1.0f + std::exp(-1.702f * row[j]));
      break;
  }
}

// A pre-norm block: x += o(attention(norm1(x))) + b, then x += down(act(up·norm2(x) + b)) + b
// (gated: down(act(gate·x + b) · (up·x + b)) + b).
void VisionEncoder::run_block(int32_t layer) {
  const VisionConfig& c = model_.config;
  const VisionLayerWeights& w = model_.weights.layers[size_t(layer)];
  const PackedLayer& p = layers_[size_t(layer)];
  const int32_t dim = c.dim, qkv_dim = 3 * dim;
  norm_rows(x_.data(), norm_.data(), rows_, w.ln1, w.ln1_bias);
  kernels::matmul(norm_.data(), rows_, dim, p.qkv, qkv_.data(), qkv_dim);
  add_bias_rows(qkv_.data(), rows_, qkv_dim, p.qkv_bias);
  if (rope_) {
    tbb::parallel_for(tbb::blocked_range<int32_t>(0, rows_, kRowGrain), [&](const tbb::blocked_range<int32_t>& range) {
      for (int32_t r = range.begin(); r < range.end(); ++r) {
        float* row = qkv_.data() + size_t(r) * qkv_dim;
        rope_->apply(row, c.n_heads, rope_y_[size_t(r)], rope_x_[size_t(r)]);
        rope_->apply(row + dim, c.n_heads, rope_y_[size_t(r)], rope_x_[size_t(r)]);
      }
    });
  }
  segment_attention(qkv_.data(), c.n_heads, c.head_dim(),
                    full_attention_[size_t(layer)] ? full_segments_ : window_segments_, att_.data(),
                    attention_scratch_);
  kernels::matmul(att_.data(), rows_, dim, p.output, sublayer_.data(), dim);
  add_bias_rows(sublayer_.data(), rows_, dim, w.o_bias, x_.data());
  std::swap(x_, sublayer_);

  norm_rows(x_.data(), norm_.data(), rows_, w.ln2, w.ln2_bias);
  const int32_t up_rows = p.up.rows(), ffn = p.down.cols();
  kernels::matmul(norm_.data(), rows_, dim, p.up, ffn_.data(), up_rows);
  add_bias_rows(ffn_.data(), rows_, up_rows, p.up_bias);
  tbb::parallel_for(tbb::blocked_range<int32_t>(0, rows_, kRowGrain), [&](const tbb::blocked_range<int32_t>& range) {
    for (int32_t r = range.begin(); r < range.end(); ++r) {
      float* row = ffn_.data() + size_t(r) * up_rows;
      if (!p.gated) {
        activate(row, ffn);
      } else if (c.activation == VisionActivation::Silu) {
        kernels::swiglu(row, row + ffn, row, ffn);
      } else {
        activate(row, ffn);
        for (int32_t j = 0; j < ffn; ++j) row[j] *= row[ffn + j];
      }
    }
  });
  kernels::matmul(ffn_.data(), rows_, up_rows, p.down, sublayer_.data(), dim);
  add_bias_rows(sublayer_.data(), rows_, dim, w.ffn_down_bias, x_.data());
  std::swap(x_, sublayer_);
}

void VisionEncoder::encode(std::span<const PixelPlanes> images, std::vector<float>& out, std::vector<int32_t>& tokens) {
  std::vector<const PixelPlanes*> pointers;
  for (const PixelPlanes& image : images) pointers.push_back(&image);
  encode(pointers, out, tokens);
}

void VisionEncoder::encode(std::span<const PixelPlanes* const> images, std::vector<float>& out,
                           std::vector<int32_t>& tokens) {
  const VisionConfig& c = model_.config;
  auto check_weights = [&] {
    if (model_.file && model_.file->lost()) {
      throw Error("projector file " + model_.path +
                  " changed after it was mapped (truncated?): its weights are lost; reload it");
    }
  };
  check_weights();
  for (size_t i = 0; i < images.size(); ++i) {
    if (!images[i]) throw Error("image " + std::to_string(i) + " is missing (null)");
    const PixelPlanes& image = *images[i];
    try {
      check_size(image.width, image.height);
    } catch (const Error& e) {
      throw Error("image " + std::to_string(i) + ": " + e.what());
    }
    if (image.values.size() != 3 * size_t(image.width) * size_t(image.height)) {
      throw Error("image " + std::to_string(i) + ": " + std::to_string(image.values.size()) + " plane values for a " +
                  size_text(image.width, image.height) + " image, not 3·" + std::to_string(image.width) + "·" +
                  std::to_string(image.height));
    }
  }
  plan(images);
  const int32_t dim = c.dim, ffn_width = layers_.empty() ? 0 : layers_[0].up.rows();
  x_.resize(size_t(rows_) * dim);
  norm_.resize(size_t(rows_) * dim);
  qkv_.resize(size_t(rows_) * 3 * dim);
  att_.resize(size_t(rows_) * dim);
  sublayer_.resize(size_t(rows_) * dim);
  ffn_.resize(size_t(rows_) * size_t(ffn_width));
  patches_.resize(size_t(rows_) * 3 * c.patch_size * c.patch_size);
  if (rope_) {
    int32_t side = 0;
    for (const ImageRows& image : images_) side = std::max({side, image.grid_w, image.grid_h});
    rope_->reserve(side);
  }
  arena_.execute([&] {
    embed_patches(images);
    if (!model_.weights.pre_ln.empty())
      norm_rows(x_.data(), x_.data(), rows_, model_.weights.pre_ln, model_.weights.pre_ln_bias);
    for (int32_t l = 0; l < c.layers_run; ++l) run_block(l);
    if (!model_.weights.post_ln.empty())
      norm_rows(x_.data(), x_.data(), rows_, model_.weights.post_ln, model_.weights.post_ln_bias);
    project(out);
  });
  tokens.clear();
  for (const ImageRows& image : images_) tokens.push_back(image.tokens);
  // The file may have been truncated during the pass: then it computed on zeros.
  check_weights();
}

}  // namespace pagoda
